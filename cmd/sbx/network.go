package main

import (
	"fmt"
	"net/netip"
	"os"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/sbxrun/sbx/netns"
)

// subnetEnv is the environment variable that sets the bridge subnet.
const subnetEnv = "SBX_SUBNET"

// parseSubnet reads a bridge subnet given as what (a flag or variable); an
// empty value keeps the default.
func parseSubnet(what, v string) (netip.Prefix, error) {
	if v == "" {
		return netip.Prefix{}, nil
	}
	p, err := netip.ParsePrefix(v)
	if err != nil || !p.Addr().Is4() || p.Bits() < 8 || p.Bits() > 28 {
		return netip.Prefix{}, fmt.Errorf("invalid %s %q: want an IPv4 CIDR between /8 and /28, e.g. 10.77.0.0/16", what, v)
	}
	return p.Masked(), nil
}

// subnetFromEnv is the bridge subnet SBX_SUBNET asks for, if any.
func subnetFromEnv() (netip.Prefix, error) {
	return parseSubnet(subnetEnv, os.Getenv(subnetEnv))
}

func init() {
	network := &cobra.Command{
		Use:   "network",
		Short: "Manage the bridge network (pool of prepared namespaces)",
		Args:  cobra.NoArgs,
	}
	pool := &cobra.Command{
		Use:   "pool",
		Short: "Fill, drain or count the pool of prepared bridged namespaces",
		Long: `The pool holds network namespaces prepared ahead (veth on the bridge,
address, anti-spoofing guard), so a bridged sandbox or run only installs its
own rules. Any sbx process sharing --root uses it; sbx serve --network-pool N
keeps it filled on its own.`,
		Args: cobra.NoArgs,
	}
	fill := &cobra.Command{
		Use:   "fill N",
		Short: "Prepare namespaces until N wait in the pool",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			want, err := strconv.Atoi(args[0])
			if err != nil || want < 0 {
				return &exitError{code: exitSbxFailed, msg: fmt.Sprintf("invalid pool size %q: want a count", args[0])}
			}
			nw, err := openNetwork()
			if err != nil {
				return &exitError{code: exitSbxFailed, msg: err.Error()}
			}
			defer nw.Close()
			have, err := nw.Pooled()
			if err != nil {
				return &exitError{code: exitSbxFailed, msg: err.Error()}
			}
			added := 0
			if want > have {
				added, err = nw.Prefill(cmd.Context(), want-have)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "added %d, %d in the pool\n", added, have+added)
			if err != nil {
				return &exitError{code: exitSbxFailed, msg: err.Error()}
			}
			return nil
		},
	}
	drain := &cobra.Command{
		Use:   "drain",
		Short: "Remove every prepared namespace from the pool",
		Args:  cobra.NoArgs,
		RunE: withNetwork(func(cmd *cobra.Command, nw *netns.Network) error {
			return nw.DrainPool(cmd.Context())
		}),
	}
	ls := &cobra.Command{
		Use:   "ls",
		Short: "Print how many prepared namespaces wait in the pool",
		Args:  cobra.NoArgs,
		RunE: withNetwork(func(cmd *cobra.Command, nw *netns.Network) error {
			n, err := nw.Pooled()
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), n)
			return nil
		}),
	}
	reset := &cobra.Command{
		Use:   "reset",
		Short: "Drain the pool and delete the bridge and sbx's nftables tables (no bridged sandbox may be left)",
		Args:  cobra.NoArgs,
		RunE: withNetwork(func(cmd *cobra.Command, nw *netns.Network) error {
			return nw.Reset(cmd.Context())
		}),
	}
	pool.AddCommand(fill, drain, ls)
	network.AddCommand(pool, reset)
	rootCmd.AddCommand(network)
}

// withNetwork runs fn with the bridge network state open; its errors are
// sbx failures (exit 125).
func withNetwork(fn func(*cobra.Command, *netns.Network) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		nw, err := openNetwork()
		if err != nil {
			return &exitError{code: exitSbxFailed, msg: err.Error()}
		}
		defer nw.Close()
		if err := fn(cmd, nw); err != nil {
			return &exitError{code: exitSbxFailed, msg: err.Error()}
		}
		return nil
	}
}
