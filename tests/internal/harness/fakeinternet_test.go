package harness

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestFakeSiteEchoesWhatCameWithTheUpgrade: the client's first bytes
// after the upgrade may reach the site before it hijacks the connection
// (with the request, or caught by the server's background read while
// the 101 goes out); the echo has them all.
func TestFakeSiteEchoesWhatCameWithTheUpgrade(t *testing.T) {
	f := &FakeInternet{t: t, seen: map[string][]string{}}
	srv := httptest.NewServer(f.siteHandler("api.test"))
	defer srv.Close()
	for i := range 20 {
		conn, err := net.Dial("tcp", srv.Listener.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
		// The request and the line in one write: the server reads both
		// before the handler hijacks.
		if _, err := fmt.Fprint(conn, "GET /ws HTTP/1.1\r\nHost: api.test\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\nping over the upgrade\n"); err != nil {
			t.Fatal(err)
		}
		br := bufio.NewReader(conn)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("upgrade %d: %v", i, err)
		}
		line, err := br.ReadString('\n')
		conn.Close()
		if resp.StatusCode != http.StatusSwitchingProtocols || strings.TrimSpace(line) != "echo:ping over the upgrade" {
			t.Fatalf("upgrade %d: status %d, echo %q (%v)", i, resp.StatusCode, line, err)
		}
	}
	if got := f.Requests("api.test"); len(got) != 20 || got[0] != "GET /ws " {
		t.Errorf("requests seen: %q", got)
	}
}
