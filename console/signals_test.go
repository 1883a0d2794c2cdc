package console

import (
	"context"
	"os"
	"syscall"
	"testing"
	"time"
)

// receive waits for sig on ch.
func receive(t *testing.T, ch <-chan os.Signal, sig os.Signal) {
	t.Helper()
	select {
	case got := <-ch:
		if got != sig {
			t.Fatalf("got %v, want %v", got, sig)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("%v was not passed on", sig)
	}
}

// TestForwardSignalsPrepared: signals that arrive after
// PrepareForwardSignals and before ForwardSignals are passed on once it
// runs, and the ones after it too.
func TestForwardSignalsPrepared(t *testing.T) {
	PrepareForwardSignals()
	PrepareForwardSignals() // a second call starts nothing
	takeForwardedDone(t)
	if err := syscall.Kill(os.Getpid(), syscall.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch := ForwardSignals(ctx, cancel)
	receive(t, ch, syscall.SIGUSR1)
	if err := syscall.Kill(os.Getpid(), syscall.SIGUSR2); err != nil {
		t.Fatal(err)
	}
	receive(t, ch, syscall.SIGUSR2)
	if prepared.in != nil {
		t.Error("ForwardSignals left the prepared registration for another call")
	}
}

// takeForwardedDone waits until the prepared registration is complete,
// leaving it prepared.
func takeForwardedDone(t *testing.T) {
	t.Helper()
	prepared.Lock()
	done := prepared.done
	prepared.Unlock()
	if done == nil {
		t.Fatal("nothing prepared")
	}
	<-done
}

// TestForwardSignalsStopped: after StopForwardSignals nothing is prepared
// and ForwardSignals registers on its own.
func TestForwardSignalsStopped(t *testing.T) {
	PrepareForwardSignals()
	StopForwardSignals()
	if prepared.in != nil {
		t.Fatal("StopForwardSignals left a registration prepared")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch := ForwardSignals(ctx, cancel)
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	receive(t, ch, syscall.SIGHUP)
}
