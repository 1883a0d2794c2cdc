package sandbox

import (
	"fmt"
	"path/filepath"
	"slices"

	"github.com/sbxrun/sbx"
)

// The egress step of a claim: a create whose egress policy inspects
// hosts (L7 rules, or secrets) gets, in the claimed member, what a cold
// create gets before its start. Its host-side egress state (a CA
// constrained to the inspected hosts, the secrets' values and fresh
// placeholders) is made for the claimant; the CA is appended to the
// trust bundles of the member's root (its writable layer) and the CA
// variables and placeholders go into the executor's defaults for later
// commands. The policy itself reaches the egress daemon through the
// lease, which claimNetwork rewrites. A claim without an egress policy
// file or secrets does none of it.

// claimEgressState reports whether claiming for o makes egress state:
// only a policy file or secrets can inspect hosts.
func claimEgressState(o *sbx.Options) bool {
	return (o.EgressPolicy != "" || len(o.Secrets) > 0) && needsEgressState(o)
}

// planClaimEgress readies the claimant's record sb (options from the
// create) for the egress step before it is first written: secret values
// leave the options, and the egress state directory, when there will be
// one, is planned so that gc removes it after a claim killed midway. It
// reports whether the claim makes egress state.
func (h *Host) planClaimEgress(sb *sbx.Sandbox) bool {
	if len(sb.Options.Secrets) == 0 && sb.Options.EgressPolicy == "" {
		return false
	}
	sb.Options.Secrets = sbx.WithoutSecretValues(sb.Options.Secrets)
	if !claimEgressState(&sb.Options) {
		return false
	}
	sb.Resources = append(slices.Clone(sb.Resources), sbx.Resource{Kind: sbx.ResourceEgressState, Path: h.egressStateDir(sb.ID)})
	return true
}

// claimEgress makes the egress state of the claimant sb (secrets carry
// the values) and puts its CA into the running member's root, in the
// member's own mount namespace, and the CA variables and placeholders
// into sb.Options.Env (personalise hands them to the executor). From here
// on a failed claim removes the member m with the claimant's resources,
// the egress state among them.
func (h *Host) claimEgress(m, sb *sbx.Sandbox, secrets []sbx.Secret) error {
	m.Resources = sb.Resources
	if err := h.writeEgressState(sb, secrets); err != nil {
		return err
	}
	root := sb.RootPath
	if root == "" {
		root = filepath.Join(h.store.RunDir(sb.ID), rootfsDir, "root")
	}
	if err := h.inMountNS(sb.ID, func() error { return h.addEgressTrust(sb, root) }); err != nil {
		return fmt.Errorf("add the egress CA to the claimed sandbox: %w", err)
	}
	return nil
}
