package netns

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"sync/atomic"
	"syscall"

	"github.com/mdlayher/netlink"
	vnetlink "github.com/vishvananda/netlink"
	vnl "github.com/vishvananda/netlink/nl"
	vnetns "github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// A removed sandbox's conntrack entries are deleted by the kernel: one
// flush per direction, filtered by the sandbox's address (a CTA_FILTER
// on a conntrack delete, Linux 6.12 and later), sent together on the
// Network's netfilter socket in the host namespace. Only kernels that
// refuse that filter (EINVAL or EOPNOTSUPP: they read the request as the
// delete of one whole tuple, and find it incomplete) get the old way,
// a dump of the host's whole table to user space and a delete of each
// match, whose cost grows with the host's traffic.

// Conntrack netlink attributes the vishvananda/netlink nl package lacks
// (linux/netfilter/nfnetlink_conntrack.h).
const (
	ctaFilter           = 25     // CTA_FILTER
	ctaFilterOrigFlags  = 1      // CTA_FILTER_ORIG_FLAGS
	ctaFilterReplyFlags = 2      // CTA_FILTER_REPLY_FLAGS
	ctaFilterFlagIPSrc  = 1 << 0 // CTA_FILTER_F_CTA_IP_SRC
)

// conntrackFlushRefused is set once the kernel refused a filtered flush:
// the process then goes straight to the dump.
var conntrackFlushRefused atomic.Bool

// forgetConnections deletes the host's conntrack entries from or to ip, so
// published-port flows (UDP above all) do not keep going to the address of a
// removed sandbox, and a later sandbox with the same address gets none of
// the old one's traffic.
func (n *Network) forgetConnections(ip netip.Addr) error {
	if !conntrackFlushRefused.Load() {
		err := n.flushConnections(ip)
		if !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.EOPNOTSUPP) {
			return err
		}
		conntrackFlushRefused.Store(true)
		n.log.Debug("the kernel flushes no conntrack entries by address; dumping the table instead", "err", err)
	}
	return n.forgetConnectionsByDump(ip)
}

// flushConnections asks the kernel to delete the entries whose original
// direction comes from ip (the sandbox's own connections) and those whose
// reply comes from ip (connections to it through a published port).
func (n *Network) flushConnections(ip netip.Addr) error {
	family, ipSrc := byte(unix.AF_INET), uint16(vnl.CTA_IP_V4_SRC)
	if ip.Is6() {
		family, ipSrc = unix.AF_INET6, vnl.CTA_IP_V6_SRC
	}
	var reqs [][]byte
	for _, dir := range [...]struct{ tuple, flags uint16 }{
		{vnl.CTA_TUPLE_ORIG, ctaFilterOrigFlags},
		{vnl.CTA_TUPLE_REPLY, ctaFilterReplyFlags},
	} {
		ae := netlink.NewAttributeEncoder()
		ae.Nested(dir.tuple, func(t *netlink.AttributeEncoder) error {
			t.Nested(vnl.CTA_TUPLE_IP, func(a *netlink.AttributeEncoder) error {
				a.Bytes(ipSrc, ip.AsSlice())
				return nil
			})
			return nil
		})
		ae.Nested(ctaFilter, func(f *netlink.AttributeEncoder) error {
			f.Uint32(dir.flags, ctaFilterFlagIPSrc)
			return nil
		})
		attrs, err := ae.Encode()
		if err != nil {
			return fmt.Errorf("encode a conntrack flush of %s: %w", ip, err)
		}
		reqs = append(reqs, append(nfgenHeader(family, 0), attrs...))
	}
	s, err := n.nfnetlink()
	if err != nil {
		return err
	}
	errs, err := s.exchange(unix.NFNL_SUBSYS_CTNETLINK<<8|vnl.IPCTNL_MSG_CT_DELETE, reqs)
	if err != nil {
		s.close()
		return fmt.Errorf("flush the conntrack entries of %s: %w", ip, err)
	}
	n.keepNFNetlink(s)
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("flush the conntrack entries of %s: %w", ip, err)
	}
	return nil
}

// exchange sends one message of type typ for each of reqs (their payloads)
// in one send, each asking for an acknowledgement, and reads the kernel's
// answer to each of them: the errors it returns are the kernel's, one per
// request refused; a failed read or send is the second result, after
// which the socket may hold answers and must not be used again.
func (s *nfnlSocket) exchange(typ uint16, reqs [][]byte) ([]error, error) {
	var buf []byte
	first := s.seq + 1
	for _, data := range reqs {
		s.seq++
		buf = binary.NativeEndian.AppendUint32(buf, uint32(unix.NLMSG_HDRLEN+len(data)))
		buf = binary.NativeEndian.AppendUint16(buf, typ)
		buf = binary.NativeEndian.AppendUint16(buf, unix.NLM_F_REQUEST|unix.NLM_F_ACK)
		buf = binary.NativeEndian.AppendUint32(buf, s.seq)
		buf = binary.NativeEndian.AppendUint32(buf, 0)
		buf = append(buf, data...)
		buf = append(buf, make([]byte, nlAlign(len(data))-len(data))...)
	}
	for {
		err := unix.Sendto(s.fd, buf, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK})
		if err == nil {
			break
		}
		if !errors.Is(err, unix.EINTR) {
			return nil, err
		}
	}
	var errs []error
	in := make([]byte, 8192)
	for answered := 0; answered < len(reqs); {
		m, from, err := unix.Recvfrom(s.fd, in, 0)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if sa, ok := from.(*unix.SockaddrNetlink); !ok || sa.Pid != 0 {
			continue // not the kernel's
		}
		replies, err := syscall.ParseNetlinkMessage(in[:m])
		if err != nil {
			return nil, err
		}
		for _, r := range replies {
			if r.Header.Type != unix.NLMSG_ERROR || r.Header.Seq < first || r.Header.Seq > s.seq {
				continue
			}
			if len(r.Data) < 4 {
				return nil, errors.New("a short netlink error message")
			}
			if e := int32(binary.NativeEndian.Uint32(r.Data)); e != 0 {
				errs = append(errs, syscall.Errno(-e))
			}
			answered++
		}
	}
	return errs, nil
}

// forgetConnectionsByDump deletes ip's conntrack entries the way kernels
// without a filtered flush allow: it reads the host's whole table.
func (n *Network) forgetConnectionsByDump(ip netip.Addr) error {
	h, err := vnetlink.NewHandleAt(vnetns.NsHandle(n.hostFD()), unix.NETLINK_NETFILTER)
	if err != nil {
		return fmt.Errorf("conntrack handle: %w", err)
	}
	defer h.Close()
	orig, reply := &vnetlink.ConntrackFilter{}, &vnetlink.ConntrackFilter{}
	if err := orig.AddIP(vnetlink.ConntrackOrigSrcIP, ip.AsSlice()); err != nil {
		return err
	}
	if err := reply.AddIP(vnetlink.ConntrackReplySrcIP, ip.AsSlice()); err != nil {
		return err
	}
	family := vnetlink.InetFamily(unix.AF_INET)
	if ip.Is6() {
		family = unix.AF_INET6
	}
	if _, err := h.ConntrackDeleteFilters(vnetlink.ConntrackTable, family, orig, reply); err != nil {
		return fmt.Errorf("delete conntrack entries of %s: %w", ip, err)
	}
	return nil
}
