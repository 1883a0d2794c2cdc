package netns

import (
	"errors"
	"sync"

	"golang.org/x/sys/unix"
)

// A socket belongs to the network namespace it was made in, whichever
// thread binds it. So where the host namespace is not the process's own
// (Config.HostNetNS), a Network keeps a few unbound sockets made there
// ahead (after a standby attach, and after each claim that took some),
// and a claim binds the ports it publishes on them without switching a
// thread to the host namespace and back; a claim that needs more than
// the stock holds binds them from a thread switched to the host namespace.

// stockPerType is how many sockets of each type (TCP, UDP) are kept.
const stockPerType = 2

// errNoStock says the stock has no socket of the type asked for.
var errNoStock = errors.New("no socket made ahead in the host namespace left")

// socketStock holds unbound sockets made in the host namespace.
type socketStock struct {
	mu       sync.Mutex
	tcp, udp []int
	closed   bool           // the Network is closed: nothing is made
	fills    sync.WaitGroup // restocks in the background, which Close waits for
}

func (s *socketStock) of(typ int) *[]int {
	if typ == unix.SOCK_DGRAM {
		return &s.udp
	}
	return &s.tcp
}

// stockedSocket is a socketFunc that takes a socket made ahead in the
// host namespace, or fails with errNoStock.
func (n *Network) stockedSocket(typ int) (int, error) {
	n.stock.mu.Lock()
	defer n.stock.mu.Unlock()
	fds := n.stock.of(typ)
	if len(*fds) == 0 {
		return -1, errNoStock
	}
	fd := (*fds)[len(*fds)-1]
	*fds = (*fds)[:len(*fds)-1]
	return fd, nil
}

// restock fills the stock up again, in the host namespace: where that is
// the process's own namespace, nothing is kept (a claim binds there
// without switching anyway).
func (n *Network) restock() {
	if n.cfg.HostNetNS == "" {
		return
	}
	n.stock.mu.Lock()
	need := [2]int{stockPerType - len(n.stock.tcp), stockPerType - len(n.stock.udp)}
	closed := n.stock.closed
	n.stock.mu.Unlock()
	if closed {
		return
	}
	if need[0] <= 0 && need[1] <= 0 {
		return
	}
	var made [2][]int
	err := InNamespace(n.hostFD(), func() error {
		for i, typ := range []int{unix.SOCK_STREAM, unix.SOCK_DGRAM} {
			for range need[i] {
				fd, err := newSocket(typ)
				if err != nil {
					return err
				}
				made[i] = append(made[i], fd)
			}
		}
		return nil
	})
	if err != nil {
		n.log.Debug("make sockets for published ports ahead", "err", err)
	}
	n.stock.mu.Lock()
	defer n.stock.mu.Unlock()
	if n.stock.closed {
		for _, fd := range append(made[0], made[1]...) {
			unix.Close(fd)
		}
		return
	}
	n.stock.tcp = append(n.stock.tcp, made[0]...)
	n.stock.udp = append(n.stock.udp, made[1]...)
}

// restockLater runs restock in the background, unless the Network is
// closed; Close waits for it, so that it never uses the host namespace's
// descriptor after Close (its number may name another file by then) and
// leaves no socket behind.
func (n *Network) restockLater() {
	n.stock.mu.Lock()
	defer n.stock.mu.Unlock()
	if n.stock.closed {
		return
	}
	n.stock.fills.Add(1)
	go func() {
		defer n.stock.fills.Done()
		n.restock()
	}()
}

// closeStock closes the sockets of the stock, once no restock runs, and
// makes no more.
func (n *Network) closeStock() {
	n.stock.mu.Lock()
	n.stock.closed = true
	n.stock.mu.Unlock()
	n.stock.fills.Wait()
	n.stock.mu.Lock()
	defer n.stock.mu.Unlock()
	for _, fd := range append(n.stock.tcp, n.stock.udp...) {
		unix.Close(fd)
	}
	n.stock.tcp, n.stock.udp = nil, nil
}
