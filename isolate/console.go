package isolate

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// recvFile receives one file descriptor sent with SCM_RIGHTS over a unix
// socket, as libcontainer sends the console master.
func recvFile(socket *os.File) (*os.File, error) {
	name := make([]byte, 4096)
	oob := make([]byte, unix.CmsgSpace(4))
	n, oobn, _, _, err := unix.Recvmsg(int(socket.Fd()), name, oob, unix.MSG_CMSG_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("recvmsg: %w", err)
	}
	msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
	if err != nil {
		return nil, fmt.Errorf("parse control message: %w", err)
	}
	if len(msgs) != 1 {
		return nil, errors.New("expected one control message with a file descriptor")
	}
	fds, err := unix.ParseUnixRights(&msgs[0])
	if err != nil {
		return nil, fmt.Errorf("parse file descriptor: %w", err)
	}
	if len(fds) != 1 {
		for _, fd := range fds {
			unix.Close(fd)
		}
		return nil, errors.New("expected exactly one file descriptor")
	}
	return os.NewFile(uintptr(fds[0]), string(name[:n])), nil
}
