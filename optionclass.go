package sbx

import (
	"reflect"
	"strings"
)

// PoolClass says what a warm pool does with one field of Options when a
// create claims one of its members.
type PoolClass string

// The classes of OptionClasses.
const (
	// PoolKey fields are fixed when a sandbox starts and cannot change in
	// a running one: a create must match the member's value to claim it.
	PoolKey PoolClass = "key"
	// PoolClaim fields are applied to the claimed member before the
	// create returns, replacing the member's own value.
	PoolClaim PoolClass = "claim"
	// PoolUnclaimable fields cannot be applied to a running member: a
	// create that sets one starts a sandbox cold.
	PoolUnclaimable PoolClass = "unclaimable"
)

// OptionClass is the pool class of one field of Options.
type OptionClass struct {
	// Field is the Go name of the field, JSON its name in JSON.
	Field, JSON string
	// Class is what a pool does with it.
	Class PoolClass
	// Claimant fields belong to the sandbox a create returns: a pool's own
	// options leave them empty (PoolSpec.Validate).
	Claimant bool
	// Default is the value an empty key field means (compared as such).
	Default string
	// How says why a field is in the key, or how a claim applies it
	// (docs/pools.md shows it).
	How string
}

// OptionClasses lists every field of Options in declaration order: the one
// place that says what a warm pool's key is and what a claim applies.
// sandbox's pool key, PoolSpec.Validate, the Nomad driver's pool checks
// and docs/pools.md are derived from it; a test fails when a field of
// Options is missing here.
var OptionClasses = []OptionClass{
	{Field: "Name", JSON: "name", Class: PoolClaim, Claimant: true, How: "the record and the name claim, as a create writes them"},
	{Field: "Image", JSON: "image", Class: PoolKey, How: "by digest: the overlay's lower layers are mounted at start"},
	{Field: "Rootfs", JSON: "rootfs", Class: PoolKey, How: "the overlay's lower layer is mounted at start"},
	{Field: "Pull", JSON: "pull", Class: PoolClaim, How: "the image is resolved (and pulled) before the claim; the key holds its digest"},
	{Field: "Cmd", JSON: "cmd", Class: PoolClaim, How: "started after the claim, as after a cold create; a pool whose members boot a main command keys on it, with env, workdir and user"},
	{Field: "AutoRemove", JSON: "auto_remove", Class: PoolClaim, Claimant: true, How: "the record: the sandbox is removed when its cmd ends"},
	{Field: "Restart", JSON: "restart", Class: PoolClaim, How: "handed to the executor with the main command started after the claim; a pool whose members boot a main command keys on it"},
	{Field: "Env", JSON: "env", Class: PoolClaim, How: "the executor's default environment for later commands"},
	{Field: "Workdir", JSON: "workdir", Class: PoolClaim, How: "the executor's default working directory (created in the root)"},
	{Field: "User", JSON: "user", Class: PoolClaim, How: "the executor's default user for later commands, looked up in the member's /etc/passwd and /etc/group at the claim; a pool whose members boot a main command keys on it"},
	{Field: "Hostname", JSON: "hostname", Class: PoolClaim, How: "sethostname in the member's UTS namespace (from the host thread that joins it to move the mounts in), and /etc/hostname and /etc/hosts rewritten in its root"},
	{Field: "Limits", JSON: "limits", Class: PoolClaim, How: "the cgroup's files (memory and swap, CFS quota, pids.max), checked against the memory budget; the writable layer's tmpfs is remounted with the new disk size"},
	{Field: "Ulimits", JSON: "ulimits", Class: PoolKey, How: "set on PID 1 before it runs and inherited by every process"},
	{Field: "Network", JSON: "network", Class: PoolKey, Default: NetworkNone, How: "the network namespace and veth are attached at start"},
	{Field: "Publish", JSON: "publish", Class: PoolClaim, Claimant: true, How: "the host ports' sockets bound and held, the DNAT rules added in the egress rules' nftables batch, recorded in its lease first"},
	{Field: "Egress", JSON: "egress", Class: PoolClaim, How: "the member's forward chain (and, for names, its redirect to the egress daemon, which is started if none runs) is refilled in one nftables batch, recorded in its lease first"},
	{Field: "AllowHostPorts", JSON: "allow_host_ports", Class: PoolClaim, How: "the member's host-input chain, refilled in the same batch"},
	{Field: "DNS", JSON: "dns", Class: PoolClaim, How: "/etc/resolv.conf rewritten in the root, and the name servers' rules in the same batch"},
	{Field: "PublishAll", JSON: "publish_all", Class: PoolClaim, Claimant: true, How: "turned into publish entries (a free host port for each port the image exposes) before the claim, then published as they are"},
	{Field: "ExtraHosts", JSON: "extra_hosts", Class: PoolClaim, How: "/etc/hosts rewritten in the root"},
	{Field: "ReadonlyRootfs", JSON: "readonly_rootfs", Class: PoolKey, How: "the root's mount flags are set at start"},
	{Field: "Volumes", JSON: "volumes", Class: PoolClaim, Claimant: true, How: "open_tree of the host directory, mount_setattr (nosuid, nodev, read-only; a tmpfs, and a volume with idmap=host, id-mapped with a private user namespace), move_mount onto a mountpoint made inside the root"},
	{Field: "Tmpfs", JSON: "tmpfs", Class: PoolClaim, Claimant: true, How: "fsopen/fsconfig/fsmount of a new tmpfs, moved in as volumes are"},
	{Field: "DiskBacking", JSON: "disk_backing", Class: PoolKey, Default: DiskBackingMemory, How: "the writable layer is mounted at start, on a tmpfs or on disk"},
	{Field: "ShmSizeBytes", JSON: "shm_size_bytes", Class: PoolKey, How: "/dev/shm is mounted with its size at start"},
	{Field: "CapAdd", JSON: "cap_add", Class: PoolKey, How: "the capability sets of PID 1, inherited by every process"},
	{Field: "CapDrop", JSON: "cap_drop", Class: PoolKey, How: "the capability sets of PID 1, inherited by every process"},
	{Field: "Seccomp", JSON: "seccomp", Class: PoolKey, Default: "default", How: "the filter is loaded into PID 1 and inherited by every process"},
	{Field: "UserNS", JSON: "userns", Class: PoolKey, Default: UserNSPrivate, How: "the user namespace every other namespace belongs to"},
	{Field: "Labels", JSON: "labels", Class: PoolClaim, Claimant: true, How: "the record"},
	{Field: "TTL", JSON: "ttl", Class: PoolClaim, Claimant: true, How: "the record and the expiry index"},
	{Field: "IdleTimeout", JSON: "idle_timeout", Class: PoolUnclaimable, How: "a pool member's activity before its claim is not the sandbox's: a create with it starts cold"},
	{Field: "Lease", JSON: "lease", Class: PoolClaim, Claimant: true, How: "the record and the expiry index, from the claim on"},
	{Field: "EgressPolicy", JSON: "egress_policy", Class: PoolClaim, Claimant: true, How: "in the lease with the egress rules (same write, same batch), which the egress daemon reads; with inspected hosts, the claimant's CA is made host-side, appended to the member's trust bundles in its writable layer, and named in the executor's defaults (SSL_CERT_FILE, REQUESTS_CA_BUNDLE, NODE_EXTRA_CA_CERTS...); a member that booted a main command is skipped"},
	{Field: "Secrets", JSON: "secrets", Class: PoolClaim, Claimant: true, How: "the bindings in the lease with the egress policy; values and fresh placeholders in the claimant's host-side egress state, the placeholders in the executor's defaults, the CA as for egress_policy"},
}

// PoolKeyValues returns the key fields of o by JSON name, each with its
// default filled in and empty lists as nil, so that two options that
// start the same sandbox give equal maps. Image and Rootfs are as given:
// the caller replaces the image's reference by its digest.
func PoolKeyValues(o *Options) map[string]any {
	v := reflect.ValueOf(o).Elem()
	out := map[string]any{}
	for _, c := range OptionClasses {
		if c.Class != PoolKey {
			continue
		}
		f := v.FieldByName(c.Field)
		switch {
		case f.Kind() == reflect.String && f.String() == "":
			out[c.JSON] = c.Default
		case f.Kind() == reflect.Slice && f.Len() == 0:
			out[c.JSON] = nil
		default:
			out[c.JSON] = f.Interface()
		}
	}
	return out
}

// OptionsSet returns the JSON names of the fields of o of class that
// are set (not their zero value or default), in declaration order;
// claimant restricts it to the fields only a claim may set.
func OptionsSet(o *Options, class PoolClass, claimant bool) []string {
	v := reflect.ValueOf(o).Elem()
	var out []string
	for _, c := range OptionClasses {
		if c.Class != class || (claimant && !c.Claimant) {
			continue
		}
		f := v.FieldByName(c.Field)
		if f.IsZero() || (f.Kind() == reflect.Slice && f.Len() == 0) || (c.Default != "" && f.String() == c.Default) {
			continue
		}
		out = append(out, c.JSON)
	}
	return out
}

// PoolKeyDiff returns the JSON names of the key fields whose values
// differ between a and b (defaults filled in), in declaration order: why
// a create cannot claim a member started with the other's options.
func PoolKeyDiff(a, b *Options) []string {
	ka, kb := PoolKeyValues(a), PoolKeyValues(b)
	var out []string
	for _, c := range OptionClasses {
		if c.Class == PoolKey && !reflect.DeepEqual(ka[c.JSON], kb[c.JSON]) {
			out = append(out, c.JSON)
		}
	}
	return out
}

// PoolKeyFieldNames lists the JSON names of the key fields, joined by
// ", ", for messages and docs.
func PoolKeyFieldNames() string {
	var names []string
	for _, c := range OptionClasses {
		if c.Class == PoolKey {
			names = append(names, c.JSON)
		}
	}
	return strings.Join(names, ", ")
}

// ClaimOptions returns o with the key fields it leaves empty taken from
// the pool's options p, and the JSON names of the key fields o sets to
// other values than p's: then no member of p can serve o. Image and
// Rootfs are left as they are (compare images by digest).
func ClaimOptions(o, p *Options) (Options, []string) {
	out := *o
	ov, pv := reflect.ValueOf(&out).Elem(), reflect.ValueOf(p).Elem()
	var differ []string
	for _, c := range OptionClasses {
		if c.Class != PoolKey || c.Field == "Image" || c.Field == "Rootfs" {
			continue
		}
		f := ov.FieldByName(c.Field)
		if f.IsZero() || (f.Kind() == reflect.Slice && f.Len() == 0) {
			f.Set(pv.FieldByName(c.Field))
		}
	}
	ko, kp := PoolKeyValues(&out), PoolKeyValues(p)
	for _, c := range OptionClasses {
		if c.Class == PoolKey && c.Field != "Image" && c.Field != "Rootfs" && !reflect.DeepEqual(ko[c.JSON], kp[c.JSON]) {
			differ = append(differ, c.JSON)
		}
	}
	return out, differ
}
