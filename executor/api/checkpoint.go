package api

// PathCheckpointPrepare: POST readies the executor for a checkpoint. The
// listening socket it serves on belongs to the host (CRIU cannot dump it
// with the sandbox), so the executor closes it, stops keeping idle
// connections, and waits on a placeholder instead: an abstract unix
// socket of the sandbox's network namespace, named in the reply
// (CheckpointPrepared). Until the host hands it a new listening socket
// (Handover), the executor answers nobody.
const PathCheckpointPrepare = "/v1/checkpoint/prepare"

// CheckpointPrepared is the reply of PathCheckpointPrepare.
type CheckpointPrepared struct {
	// Listener is the placeholder's abstract address ("@sbx-ckpt-...").
	Listener string `json:"listener"`
}

// The handover on the placeholder (not HTTP): the host connects to it from
// the sandbox's network namespace and sends one byte carrying one or two
// file descriptors (SCM_RIGHTS): a listening unix socket and the file the
// executor writes its output to (until then the sandbox's /dev/null);
// the executor serves on the socket from then on, closes the placeholder
// and replies HandoverOK, or a line saying why not and keeps waiting.
const (
	HandoverOK      = "ok\n"
	MaxHandoverLine = 256 // cap on a handover reply the host reads
)
