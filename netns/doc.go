// Package netns provides the network modes of sandboxes: none, host and bridge with NAT, published ports and egress policy.
package netns
