package sandbox

import (
	"context"
	"fmt"

	"github.com/sbxrun/sbx"
)

// SetEgress replaces the egress policy of the bridged sandbox ref: the
// lease records it first, the rules change in one batch (the sandbox is
// under its old rules or its new ones, never none), the egress daemon is
// started if the new policy names hosts and none runs, and the record
// keeps the new Options.Egress. Bad input changes nothing.
func (h *Host) SetEgress(ctx context.Context, ref string, u sbx.EgressUpdate) (*sbx.Sandbox, error) {
	h.removeExpired(ctx)
	l, sb, err := h.lock(ctx, ref)
	if err != nil {
		return nil, err
	}
	defer l.Unlock()
	switch {
	case sb.Pool != "":
		return nil, fmt.Errorf("%w: sandbox %s is an idle pool member; claim it with the policy instead", sbx.ErrState, sb.ShortID())
	case sb.Status == sbx.StatusRemoving || sb.Status == sbx.StatusCreating:
		return nil, fmt.Errorf("%w: sandbox %s is %s", sbx.ErrState, sb.ShortID(), sb.Status)
	case sb.Options.Network != sbx.NetworkBridge:
		return nil, fmt.Errorf("%w: sandbox %s has no bridged network (egress policies need --network bridge)", sbx.ErrInvalid, sb.ShortID())
	}
	o := sb.Options
	o.Egress, o.Publish = u.Egress, nil
	na, err := parseNetwork(&o, hostname(sb))
	if err != nil {
		return nil, err
	}
	n, err := h.network()
	if err != nil {
		return nil, err
	}
	r, err := n.Reconfigure(ctx, sb.ID, na)
	if err == nil {
		err = r.Wait()
	}
	if err != nil {
		return nil, fmt.Errorf("change the egress policy of sandbox %s: %w", sb.ShortID(), err)
	}
	sb.Options.Egress = u.Egress
	if sb.Network != nil {
		sb.Network.Egress = networkInfo(r.Attachment).Egress
	}
	if err := l.Write(sb); err != nil {
		return nil, fmt.Errorf("record the egress policy of sandbox %s (its rules have it): %w", sb.ShortID(), err)
	}
	if na.Egress.Names.HasNames() {
		if err := h.ensureEgress(ctx); err != nil {
			return nil, err
		}
	}
	return sb, nil
}
