package imagecache

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
	"golang.org/x/sys/unix"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/imagecache/unpack"
	"github.com/sbxrun/sbx/internal/errkind"
)

// ErrDigestMismatch means content did not match the digest that names it.
var ErrDigestMismatch = errors.New("digest mismatch")

// ErrUnsupported means an image uses a media type or platform sbx cannot run.
var ErrUnsupported = errkind.New("unsupported image", sbx.ErrInvalid)

// Phase is the state of one layer in a Progress report.
type Phase string

// Phases of a layer during a pull or import.
const (
	PhaseWaiting     Phase = "waiting"     // queued, or another process is unpacking it
	PhaseDownloading Phase = "downloading" // streaming and unpacking; Current/Total count compressed bytes
	PhaseUnpacking   Phase = "unpacking"   // stream complete, finishing the unpack
	PhaseDone        Phase = "done"
	PhaseCached      Phase = "cached" // already in the store
)

// Progress reports the state of one layer. Progress callbacks are never
// called concurrently.
type Progress struct {
	Layer   string // layer digest (or diffID)
	Index   int    // position in the image, lowest first
	Count   int    // number of layers in the image
	Phase   Phase
	Current int64 // bytes read so far
	Total   int64 // bytes to read, or 0 when unknown
}

// ProgressFunc receives Progress reports.
type ProgressFunc func(Progress)

// layerSource is one layer to bring into the store.
type layerSource struct {
	diffID string // expected sha256 of the uncompressed tar; "" to compute (rootfs import)
	digest string // expected sha256 of the stream as opened; "" when not checked
	// digestChecked means the reader from open checks digest itself.
	digestChecked bool
	size          int64 // size of the stream, for progress; 0 when unknown
	open          func() (io.ReadCloser, error)
}

type layerMeta struct {
	DiffID    string `json:"diffID"`
	Size      int64  `json:"size"`
	UsedLower bool   `json:"usedLower,omitempty"`
}

func hexOf(digest string) string { return strings.TrimPrefix(digest, "sha256:") }

// chainIDs returns the OCI chain IDs of diffIDs.
func chainIDs(diffIDs []string) []string {
	out := make([]string, len(diffIDs))
	for i, d := range diffIDs {
		if i == 0 {
			out[i] = d
			continue
		}
		sum := sha256.Sum256([]byte(out[i-1] + " " + d))
		out[i] = "sha256:" + hex.EncodeToString(sum[:])
	}
	return out
}

func exists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}

// cachedLayer returns the key under which the layer (diffID, chain) is
// stored, or "".
func (s *Store) cachedLayer(diffID, chain string) string {
	if diffID == "" {
		return ""
	}
	if k := hexOf(diffID); exists(s.LayerDir(k)) {
		return k
	}
	if chain != "" {
		if k := "c-" + hexOf(chain); exists(s.LayerDir(k)) {
			return k
		}
	}
	return ""
}

func (s *Store) readMeta(key string) layerMeta {
	var m layerMeta
	if data, err := os.ReadFile(filepath.Join(s.root, "layers", key+".json")); err == nil {
		_ = json.Unmarshal(data, &m)
	}
	return m
}

// ingest brings every layer into the store, concurrently, and returns
// their records, lowest first. The caller holds the store lock shared.
func (s *Store) ingest(ctx context.Context, srcs []layerSource, progress ProgressFunc) ([]layerRec, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var pmu sync.Mutex
	report := func(p Progress) {
		if progress == nil {
			return
		}
		pmu.Lock()
		defer pmu.Unlock()
		p.Count = len(srcs)
		progress(p)
	}
	diffIDs := make([]string, len(srcs))
	known := true
	for i, src := range srcs {
		diffIDs[i] = src.diffID
		known = known && src.diffID != ""
	}
	var chains []string
	if known {
		chains = chainIDs(diffIDs)
	}
	recs := make([]layerRec, len(srcs))
	done := make([]chan struct{}, len(srcs))
	errs := make([]error, len(srcs))
	for i := range done {
		done[i] = make(chan struct{})
	}
	sem := make(chan struct{}, s.opts.Concurrency)
	// lower returns the directories of layers below i, topmost first. It
	// gives up the caller's slot while it waits, or layers waiting for
	// their lowers could hold every slot the lowers need.
	lower := func(i int, sl *slot) func(context.Context) ([]string, error) {
		return func(ctx context.Context) ([]string, error) {
			sl.release()
			dirs := make([]string, 0, i)
			for j := i - 1; j >= 0; j-- {
				select {
				case <-done[j]:
				case <-ctx.Done():
					return nil, ctx.Err()
				}
				if errs[j] != nil {
					return nil, fmt.Errorf("layer %d failed: %w", j, errs[j])
				}
				dirs = append(dirs, s.LayerDir(recs[j].Key))
			}
			return dirs, sl.acquire(ctx)
		}
	}
	firstOf := map[string]int{}
	for i := len(srcs) - 1; i >= 0; i-- {
		firstOf[srcs[i].diffID] = i
	}
	var wg sync.WaitGroup
	for i, src := range srcs {
		label := src.digest
		if label == "" {
			label = src.diffID
		}
		if label == "" {
			label = fmt.Sprintf("layer%d", i+1) // not known before it is read
		}
		report(Progress{Layer: label, Index: i, Phase: PhaseWaiting, Total: src.size})
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer close(done[i])
			chain := ""
			if chains != nil {
				chain = chains[i]
			}
			// A layer repeated in the image waits for its first occurrence, so
			// that a later copy never holds the layer lock its lowers need.
			if first := firstOf[src.diffID]; src.diffID != "" && first < i {
				select {
				case <-done[first]:
				case <-ctx.Done():
					errs[i] = ctx.Err()
					return
				}
			}
			sl := &slot{sem: sem}
			if err := sl.acquire(ctx); err != nil {
				errs[i] = err
				return
			}
			defer sl.release()
			rec, cached, err := s.ensureLayer(ctx, src, chain, lower(i, sl), func(p Progress) {
				p.Layer, p.Index = label, i
				report(p)
			})
			if err != nil {
				errs[i] = fmt.Errorf("layer %d (%s): %w", i, shortDigest(label), err)
				cancel()
				return
			}
			recs[i] = rec
			if src.digest == "" && src.diffID == "" {
				label = rec.DiffID // known now that the layer is read
			}
			if cached {
				report(Progress{Layer: label, Index: i, Phase: PhaseCached, Current: src.size, Total: src.size})
			} else {
				report(Progress{Layer: label, Index: i, Phase: PhaseDone, Current: src.size, Total: src.size})
			}
		}()
	}
	wg.Wait()
	// Report the first real failure, not the cancellations it caused.
	var first error
	for _, err := range errs {
		if err != nil && !errors.Is(err, context.Canceled) {
			first = err
			break
		}
	}
	if first == nil {
		for _, err := range errs {
			if err != nil {
				first = err
				break
			}
		}
	}
	return recs, first
}

// slot is one layer's hold on the concurrency limit.
type slot struct {
	sem  chan struct{}
	held bool
}

func (s *slot) acquire(ctx context.Context) error {
	select {
	case s.sem <- struct{}{}:
		s.held = true
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s *slot) release() {
	if s.held {
		s.held = false
		<-s.sem
	}
}

func shortDigest(d string) string {
	h := hexOf(d)
	if len(h) > 12 {
		h = h[:12]
	}
	return h
}

// ensureLayer makes one layer present in the store, doing the work once
// across goroutines and processes.
func (s *Store) ensureLayer(ctx context.Context, src layerSource, chain string, lower func(context.Context) ([]string, error), report ProgressFunc) (layerRec, bool, error) {
	if key := s.cachedLayer(src.diffID, chain); key != "" {
		return layerRec{Key: key, DiffID: src.diffID, Size: s.readMeta(key).Size}, true, nil
	}
	if src.diffID != "" {
		unlock, err := s.lock(ctx, "layer-"+hexOf(src.diffID), unix.LOCK_EX)
		if err != nil {
			return layerRec{}, false, err
		}
		defer unlock()
		// Someone else may have finished it while we waited.
		if key := s.cachedLayer(src.diffID, chain); key != "" {
			return layerRec{Key: key, DiffID: src.diffID, Size: s.readMeta(key).Size}, true, nil
		}
	}
	tmp, err := os.MkdirTemp(filepath.Join(s.root, "tmp"), "layer-")
	if err != nil {
		return layerRec{}, false, diskErr(s.root, fmt.Errorf("create unpack directory: %w", err))
	}
	// MkdirTemp makes 0700; a lower dir must be traversable like "/".
	if err := os.Chmod(tmp, 0o755); err != nil {
		os.RemoveAll(tmp)
		return layerRec{}, false, err
	}
	keep := false
	defer func() {
		if !keep {
			os.RemoveAll(tmp)
		}
	}()
	diffID, stats, err := s.unpackStream(ctx, src, tmp, lower, report)
	if err != nil {
		return layerRec{}, false, diskErr(s.root, err)
	}
	key := hexOf(diffID)
	if stats.UsedLower {
		if chain == "" {
			return layerRec{}, false, errors.New("layer hardlinks into lower layers, which an import of one layer cannot have")
		}
		key = "c-" + hexOf(chain)
	}
	if src.diffID == "" {
		// Key known only now: take its lock before publishing.
		unlock, err := s.lock(ctx, "layer-"+key, unix.LOCK_EX)
		if err != nil {
			return layerRec{}, false, err
		}
		defer unlock()
		if exists(s.LayerDir(key)) {
			return layerRec{Key: key, DiffID: diffID, Size: s.readMeta(key).Size}, true, nil
		}
	}
	// Data on disk before the layer becomes visible: after a power loss a
	// published layer is complete, never a set of empty files.
	if err := syncFS(tmp); err != nil {
		return layerRec{}, false, diskErr(s.root, fmt.Errorf("sync layer: %w", err))
	}
	meta, _ := json.Marshal(layerMeta{DiffID: diffID, Size: stats.Bytes, UsedLower: stats.UsedLower})
	if err := os.WriteFile(filepath.Join(s.root, "layers", key+".json"), meta, 0o600); err != nil {
		return layerRec{}, false, diskErr(s.root, fmt.Errorf("write layer metadata: %w", err))
	}
	if err := os.Rename(tmp, s.LayerDir(key)); err != nil {
		return layerRec{}, false, fmt.Errorf("publish layer: %w", err)
	}
	keep = true
	return layerRec{Key: key, DiffID: diffID, Size: stats.Bytes}, false, nil
}

// diskErr makes a full disk say so.
func diskErr(root string, err error) error {
	if errors.Is(err, unix.ENOSPC) || errors.Is(err, unix.EDQUOT) {
		return fmt.Errorf("no space left for the image store %s; free space or use another --root: %w", root, err)
	}
	return err
}

// unpackStream reads the layer, decompresses, verifies and unpacks it into
// dir. Decompression and hashing run in one goroutine and the unpack in
// another, so one layer keeps two cores busy.
func (s *Store) unpackStream(ctx context.Context, src layerSource, dir string, lower func(context.Context) ([]string, error), report ProgressFunc) (string, unpack.Stats, error) {
	rc, err := src.open()
	if err != nil {
		return "", unpack.Stats{}, fmt.Errorf("fetch: %w", classify(err))
	}
	defer rc.Close()
	var compHash hash.Hash
	var compressed io.Reader = &progressReader{r: rc, total: src.size, report: report}
	counter := compressed.(*progressReader)
	if src.digest != "" && !src.digestChecked {
		compHash = sha256.New()
		compressed = io.TeeReader(compressed, compHash)
	}
	br := bufio.NewReaderSize(compressed, 1<<20)
	dr, closeDecomp, err := decompressor(br)
	if err != nil {
		return "", unpack.Stats{}, err
	}
	defer closeDecomp()

	diffHash := sha256.New()
	pipe := newChunkPipe()
	var readErr error
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		readErr = pipe.fill(dr, diffHash)
		if readErr == nil {
			// Trailing bytes after the compressed data still count for the digest.
			_, readErr = io.Copy(io.Discard, br)
		}
		if readErr != nil {
			readErr = fmt.Errorf("read layer: %w", classify(readErr))
		}
	}()
	stats, err := unpack.Layer(ctx, pipe, dir, unpack.Options{Limits: s.opts.Limits, Lower: lower})
	if err == nil {
		// The diffID covers the whole stream, including tar padding.
		_, err = io.Copy(io.Discard, pipe)
	}
	pipe.close()
	if err != nil {
		// Unblock the reader if it waits on a stalled source.
		rc.Close()
	}
	wg.Wait()
	if err != nil {
		// A failed read surfaces in the unpacker as a tar error: report the cause.
		if pipe.readFailed && readErr != nil {
			return "", stats, readErr
		}
		return "", stats, err
	}
	if readErr != nil {
		return "", stats, readErr
	}
	report(Progress{Phase: PhaseUnpacking, Current: counter.n.Load(), Total: src.size})
	gotDiff := "sha256:" + hex.EncodeToString(diffHash.Sum(nil))
	if compHash != nil {
		if got := "sha256:" + hex.EncodeToString(compHash.Sum(nil)); got != src.digest {
			return "", stats, fmt.Errorf("%w: layer blob is %s, expected %s; the source is corrupt or was tampered with", ErrDigestMismatch, got, src.digest)
		}
	}
	if src.diffID != "" && gotDiff != src.diffID {
		return "", stats, fmt.Errorf("%w: uncompressed layer is %s, the image config says %s", ErrDigestMismatch, gotDiff, src.diffID)
	}
	return gotDiff, stats, nil
}

// decompressor detects gzip, zstd or a plain tar by magic bytes.
func decompressor(br *bufio.Reader) (io.Reader, func(), error) {
	magic, _ := br.Peek(4)
	switch {
	case len(magic) >= 2 && magic[0] == 0x1f && magic[1] == 0x8b:
		gz, err := gzip.NewReader(br)
		if err != nil {
			return nil, nil, fmt.Errorf("read gzip layer: %w", err)
		}
		return gz, func() { gz.Close() }, nil
	case len(magic) == 4 && magic[0] == 0x28 && magic[1] == 0xb5 && magic[2] == 0x2f && magic[3] == 0xfd:
		zr, err := zstd.NewReader(br, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(1<<30))
		if err != nil {
			return nil, nil, fmt.Errorf("read zstd layer: %w", err)
		}
		return zr, zr.Close, nil
	}
	return br, func() {}, nil
}

// progressReader counts bytes and reports at most every 100 ms.
type progressReader struct {
	r      io.Reader
	n      atomic.Int64
	total  int64
	last   time.Time
	report ProgressFunc
}

func (p *progressReader) Read(b []byte) (int, error) {
	n, err := p.r.Read(b)
	cur := p.n.Add(int64(n))
	if now := time.Now(); now.Sub(p.last) > 100*time.Millisecond {
		p.last = now
		p.report(Progress{Phase: PhaseDownloading, Current: cur, Total: p.total})
	}
	return n, err
}

var errPipeClosed = errors.New("layer reader closed")

// chunkPipe hands decompressed data to the unpacker in 1 MiB chunks through
// a small queue, so decompression runs ahead of the file writes.
type chunkPipe struct {
	ch     chan []byte
	free   chan []byte
	done   chan struct{}
	once   sync.Once
	cur    []byte
	buf    []byte
	err    error // set before ch is closed
	closed bool
	// readFailed: the unpacker saw the source fail (not the end of it).
	readFailed bool
}

func newChunkPipe() *chunkPipe {
	return &chunkPipe{ch: make(chan []byte, 8), free: make(chan []byte, 10), done: make(chan struct{})}
}

// fill copies r into the pipe, hashing it, until EOF or an error.
func (p *chunkPipe) fill(r io.Reader, h hash.Hash) error {
	var err error
	defer func() {
		if err == nil {
			p.err = io.EOF
		} else {
			p.err = err
		}
		close(p.ch)
	}()
	for {
		var b []byte
		select {
		case b = <-p.free:
		default:
			b = make([]byte, 1<<20)
		}
		n, rerr := io.ReadFull(r, b)
		if n > 0 {
			h.Write(b[:n])
			select {
			case p.ch <- b[:n]:
			case <-p.done:
				err = errPipeClosed
				return err
			}
		}
		if rerr == io.EOF || rerr == io.ErrUnexpectedEOF {
			return nil
		}
		if rerr != nil {
			err = rerr
			return err
		}
	}
}

func (p *chunkPipe) Read(b []byte) (int, error) {
	if p.closed {
		return 0, errPipeClosed
	}
	for len(p.cur) == 0 {
		if p.buf != nil {
			select {
			case p.free <- p.buf[:cap(p.buf)]:
			default:
			}
			p.buf = nil
		}
		c, ok := <-p.ch
		if !ok {
			if p.err != io.EOF {
				p.readFailed = true
			}
			return 0, p.err
		}
		p.cur, p.buf = c, c
	}
	n := copy(b, p.cur)
	p.cur = p.cur[n:]
	return n, nil
}

func (p *chunkPipe) close() {
	p.once.Do(func() { close(p.done) })
	p.closed = true
}

func syncFS(dir string) error {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	return unix.Syncfs(fd)
}
