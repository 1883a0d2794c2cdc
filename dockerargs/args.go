package dockerargs

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/sbxrun/sbx"
)

// SplitCopyPath splits "ID:PATH", as docker cp does: a ':' with no '/'
// before it marks a sandbox path (write ./a:b for a host file named a:b).
// ok is false for a host path.
func SplitCopyPath(s string) (ref, path string, ok bool) {
	ref, path, ok = strings.Cut(s, ":")
	if !ok || ref == "" || strings.Contains(ref, "/") || path == "" {
		return "", "", false
	}
	return ref, path, true
}

// ParseLabels parses --label KEY=VALUE entries; none is nil.
func ParseLabels(labels []string) (map[string]string, error) {
	return keyValues("label", labels)
}

// ParseEnv parses exec's --env KEY=VALUE entries into a map; none is nil.
func ParseEnv(env []string) (map[string]string, error) {
	return keyValues("env", env)
}

// keyValues parses the KEY=VALUE entries of --flag, later ones winning.
func keyValues(flag string, entries []string) (map[string]string, error) {
	var out map[string]string
	for _, e := range entries {
		k, v, ok := strings.Cut(e, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("invalid --%s %q: use KEY=VALUE", flag, e)
		}
		if out == nil {
			out = map[string]string{}
		}
		out[k] = v
	}
	return out, nil
}

// ParseFilters parses ps's --filter terms (label=KEY[=VALUE],
// status=STATUS, name=NAME) into f.
func ParseFilters(f *sbx.Filter, filters []string) error {
	for _, fl := range filters {
		k, v, _ := strings.Cut(fl, "=")
		switch k {
		case "label":
			if err := f.ParseLabel(v); err != nil {
				return err
			}
		case "status":
			f.Status = sbx.Status(v)
		case "name":
			f.Name = v
		default:
			return fmt.Errorf("invalid --filter %q: use label=KEY=VALUE, status=STATUS or name=NAME", fl)
		}
	}
	return nil
}

// MatchPort reports whether a published port is the one docker port's
// query names: "80/udp", or "80" for TCP.
func MatchPort(p sbx.PortMapping, query string) bool {
	return query == fmt.Sprintf("%d/%s", p.ContainerPort, p.Proto) ||
		(query == strconv.Itoa(int(p.ContainerPort)) && p.Proto == "tcp")
}

// CheckImageArg refuses a first argument of run that cannot be an image
// (a path), saying what to write instead.
func CheckImageArg(ref string) error {
	if strings.HasPrefix(ref, "/") || strings.HasPrefix(ref, ".") {
		return fmt.Errorf("%q is a path, not an image: to run a host command in a sandbox write sbx run -- %s ..., or give --rootfs DIR", ref, ref)
	}
	return nil
}

// WithImageHint adds to a failure to find or pull image that a bare word
// may have been meant as a host command.
func WithImageHint(err error, image string) error {
	if image == "" || strings.ContainsAny(image, ":/@") {
		return err
	}
	for _, e := range []error{sbx.ErrImageNotFound, sbx.ErrRegistryUnreachable, sbx.ErrRegistryAuth} {
		if errors.Is(err, e) {
			return fmt.Errorf("%w; %q was taken as an image (not cached, not pulled): to run the host command %s in a sandbox, write sbx run -- %s", err, image, image, image)
		}
	}
	return err
}

// ImageCommand is the argv docker runs for image with CMD args: the
// image's Entrypoint (or entrypoint when not nil) followed by args or the
// image's Cmd (ImageConfig.Process). The image is pulled first as pull
// says: "always", "never", or else when it is missing.
func ImageCommand(ctx context.Context, im sbx.Images, image, pull string, entrypoint, args []string, progress func(sbx.PullProgress)) ([]string, error) {
	img, err := im.InspectImage(ctx, image)
	if pull == "always" || (err != nil && errors.Is(err, sbx.ErrImageNotFound) && pull != "never") {
		if _, err = im.PullImage(ctx, image, progress); err == nil {
			img, err = im.InspectImage(ctx, image)
		}
	}
	if err != nil {
		return nil, err
	}
	var cfg sbx.ImageConfig
	if img.Config != nil {
		cfg = *img.Config
	}
	p, err := cfg.Process(entrypoint, args, nil, "", "")
	return p.Args, err
}
