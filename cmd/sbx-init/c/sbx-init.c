/*
 * sbx-init: PID 1 of one-shot sandboxes (sbx run). It loads the sandbox's
 * seccomp filter, starts the command in its own process group, forwards
 * signals to that group, reaps every orphan, kills the whole sandbox when
 * the host's sbx process goes away (the lifeline), and reports how the
 * command ended to the host over a pipe.
 *
 *   sbx-init reaper [--status-fd N] [--lifeline-fd N] [--seccomp-fd N] [--tty] [--] CMD [ARG...]
 *
 * It behaves as isolate/reaper (Go, also run as "sbx reaper"), and is
 * written in C because it starts in every one-shot run: a Go program's
 * runtime start, signal set-up and fork cost 3-4 ms of CPU there, this one
 * a fraction of a millisecond (BENCHMARKS.md, "Session 4, startup").
 *
 * The status is one JSON line, as the Go reaper writes it:
 *   {"exit_code":N[,"signal":S][,"exec_error":"..."]}
 * The host believes only what agrees with the kernel's wait status of this
 * process, which exits with the command's code (128+N for signal N).
 *
 * Build: cc -static -O2 (internal/helperbin's go:generate).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define EXIT_USAGE 125
#define EXIT_CANNOT_EXEC 126
#define EXIT_NOT_FOUND 127

/* A compiled program: "SBXF", a uint32 of seccomp flags, then classic BPF
 * (seccomp/bpfload). At most BPF_MAXINSNS instructions. */
#define SECCOMP_MAGIC "SBXF"
#define MAX_PROGRAM_BYTES (4096 * 8)
#define OOM_BOOST 500

static const int forwarded[] = {SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGUSR1, SIGUSR2, SIGALRM, SIGCONT, SIGTSTP};

static void die(int code, const char *fmt, const char *arg)
{
	fputs("sbx init: ", stderr);
	fprintf(stderr, fmt, arg);
	fputc('\n', stderr);
	exit(code);
}

/* parse_fd reads a flag's value: a non-negative int, as Go's flag.Int
 * would accept it (also -1: none). */
static int parse_fd(const char *name, const char *v)
{
	char *end;
	errno = 0;
	long n = strtol(v, &end, 0);
	if (errno || *v == '\0' || *end != '\0' || n < -1 || n > INT_MAX) {
		fprintf(stderr, "invalid value \"%s\" for flag -%s: parse error\n", v, name);
		exit(EXIT_USAGE);
	}
	return (int)n;
}

/* Non-dumpable (nothing in the sandbox may ptrace or read this process),
 * and every descriptor above 2 close-on-exec, so that the command inherits
 * none of the host's pipes (it could forge the status). */
static void guard(void)
{
	if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0)
		die(EXIT_USAGE, "make the process non-dumpable: %s", strerror(errno));
#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif
	if (syscall(SYS_close_range, 3U, ~0U, CLOSE_RANGE_CLOEXEC) == 0)
		return;
	if (errno != ENOSYS && errno != EINVAL)
		die(EXIT_USAGE, "close_range: %s", strerror(errno));
	DIR *d = opendir("/proc/self/fd"); /* kernels before 5.11 */
	if (!d)
		die(EXIT_USAGE, "list open descriptors: %s", strerror(errno));
	struct dirent *e;
	while ((e = readdir(d))) {
		int fd = atoi(e->d_name);
		if (fd >= 3 && fd != dirfd(d) && fcntl(fd, F_SETFD, FD_CLOEXEC) != 0 && errno != EBADF)
			die(EXIT_USAGE, "set close-on-exec: %s", strerror(errno));
	}
	closedir(d);
}

/* load_seccomp installs the compiled program read from fd on this process
 * (no_new_privs is already set by libcontainer). */
static void load_seccomp(int fd)
{
	static unsigned char buf[MAX_PROGRAM_BYTES + 9];
	size_t len = 0;
	for (;;) {
		ssize_t n = read(fd, buf + len, sizeof buf - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			die(EXIT_CANNOT_EXEC, "read seccomp program: %s", strerror(errno));
		if (n == 0 || (len += (size_t)n) == sizeof buf)
			break;
	}
	close(fd);
	if (len <= 8 || len % 8 != 0 || len > MAX_PROGRAM_BYTES + 8 || memcmp(buf, SECCOMP_MAGIC, 4) != 0) {
		char n[32];
		snprintf(n, sizeof n, "%zu", len);
		die(EXIT_CANNOT_EXEC, "invalid seccomp program of %s bytes", n);
	}
	uint32_t flags;
	memcpy(&flags, buf + 4, 4);
	struct sock_fprog prog = {.len = (unsigned short)((len - 8) / 8), .filter = (struct sock_filter *)(buf + 8)};
	if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, flags | SECCOMP_FILTER_FLAG_TSYNC, &prog) != 0)
		die(EXIT_CANNOT_EXEC, "load seccomp filter: %s", strerror(errno));
}

/* The status, and the JSON line that carries it. */
struct status {
	int exit_code;
	int signal;
	char exec_error[1024];
};

static void json_string(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		if (c == '"' || c == '\\')
			fprintf(f, "\\%c", c);
		else if (c < 0x20 || c == '<' || c == '>' || c == '&' || c == 0x7f)
			fprintf(f, "\\u%04x", c);
		else
			fputc(c, f);
	}
	fputc('"', f);
}

static void write_status(int fd, const struct status *st)
{
	FILE *f = fdopen(fd, "w");
	if (!f)
		return;
	fprintf(f, "{\"exit_code\":%d", st->exit_code);
	if (st->signal)
		fprintf(f, ",\"signal\":%d", st->signal);
	if (st->exec_error[0]) {
		fputs(",\"exec_error\":", f);
		json_string(f, st->exec_error);
	}
	fputs("}\n", f);
	fclose(f);
}

static int status_fd = -1;

/* supervision_failed ends the sandbox when this init can no longer watch
 * the command (a seccomp profile that denies what it needs, say): it
 * kills every other process, reports 126 with the reason, and exits. It
 * never reports an outcome it did not see. */
static void supervision_failed(const char *what, int err)
{
	kill(-1, SIGKILL);
	struct status st = {.exit_code = EXIT_CANNOT_EXEC};
	snprintf(st.exec_error, sizeof st.exec_error, "sbx init: cannot supervise the command: %s: %s", what, strerror(err));
	fprintf(stderr, "%s\n", st.exec_error);
	if (status_fd >= 0)
		write_status(status_fd, &st);
	_exit(EXIT_CANNOT_EXEC);
}

/* Go's error texts are strerror's with a lower-case first letter. */
static const char *errtext(int err, char *buf, size_t n)
{
	snprintf(buf, n, "%s", strerror(err));
	if (buf[0] >= 'A' && buf[0] <= 'Z')
		buf[0] = (char)(buf[0] - 'A' + 'a');
	return buf;
}

/* go_quote writes s as Go's strconv.Quote would for printable ASCII, with
 * \xNN for other bytes (the host makes the text safe to print anyway). */
static void go_quote(char *out, size_t n, const char *s)
{
	size_t o = 0;
	if (o + 1 < n)
		out[o++] = '"';
	for (; *s && o + 5 < n; s++) {
		unsigned char c = (unsigned char)*s;
		if (c == '"' || c == '\\')
			o += (size_t)snprintf(out + o, n - o, "\\%c", c);
		else if (c == '\n')
			o += (size_t)snprintf(out + o, n - o, "\\n");
		else if (c == '\t')
			o += (size_t)snprintf(out + o, n - o, "\\t");
		else if (c < 0x20 || c >= 0x7f)
			o += (size_t)snprintf(out + o, n - o, "\\x%02x", c);
		else
			out[o++] = (char)c;
	}
	if (o + 1 < n)
		out[o++] = '"';
	out[o] = '\0';
}

/* find_executable is Go's exec.findExecutable: 0 or an errno (EACCES also
 * stands for Go's fs.ErrPermission, "permission denied"); *from_stat is
 * set when stat failed (Go's error then reads "stat PATH: ..."). */
static int find_executable(const char *file, int *from_stat)
{
	struct stat st;
	*from_stat = 0;
	if (stat(file, &st) != 0) {
		*from_stat = 1;
		return errno;
	}
	if (S_ISDIR(st.st_mode))
		return EISDIR;
	if (faccessat(AT_FDCWD, file, X_OK, AT_EACCESS) == 0)
		return 0;
	if (errno != ENOSYS && errno != EPERM)
		return errno;
	return (st.st_mode & 0111) ? 0 : EACCES;
}

/* exec_failure fills st as the Go reaper does for a command that cannot
 * start: code is 127 when it does not exist, else 126. A lookup error
 * reads as Go's exec.Error ("exec: \"NAME\": ..."), an exec error as
 * "NAME: ...". text, when set, replaces the errno's text. */
static void exec_failure(struct status *st, const char *name, int code, int err, int lookup, const char *text)
{
	char q[512], e[256];
	st->exit_code = code;
	if (!text)
		text = errtext(err, e, sizeof e);
	if (lookup) {
		go_quote(q, sizeof q, name);
		snprintf(st->exec_error, sizeof st->exec_error, "exec: %s: %s", q, text);
	} else {
		snprintf(st->exec_error, sizeof st->exec_error, "%s: %s", name, text);
	}
}

/* code_of is the exit code of a command that could not start with err. */
static int code_of(int err) { return err == ENOENT ? EXIT_NOT_FOUND : EXIT_CANNOT_EXEC; }

/* look_path is Go's exec.LookPath: a name with a slash is checked as it
 * is, any other is searched in $PATH. It returns 0 and the path, or -1
 * with st filled in. */
static int look_path(const char *file, char *path, size_t n, struct status *st)
{
	int from_stat;
	if (strchr(file, '/')) {
		int err = find_executable(file, &from_stat);
		if (err) {
			char text[PATH_MAX + 300], e[256];
			snprintf(text, sizeof text, "%s%s%s%s", from_stat ? "stat " : "", from_stat ? file : "",
				 from_stat ? ": " : "", errtext(err, e, sizeof e));
			exec_failure(st, file, code_of(err), err, 1, text);
			return -1;
		}
		snprintf(path, n, "%s", file);
		return 0;
	}
	const char *p = getenv("PATH");
	if (!p)
		p = "";
	for (;;) {
		const char *colon = strchr(p, ':');
		size_t dl = colon ? (size_t)(colon - p) : strlen(p);
		char dir[PATH_MAX];
		if (dl == 0)
			snprintf(dir, sizeof dir, "."); /* an empty entry is the current directory */
		else
			snprintf(dir, sizeof dir, "%.*s", (int)(dl < sizeof dir ? dl : sizeof dir - 1), p);
		if (snprintf(path, n, "%s/%s", dir, file) < (int)n && find_executable(path, &from_stat) == 0) {
			if (dir[0] != '/') {
				exec_failure(st, file, EXIT_CANNOT_EXEC, 0, 1, "cannot run executable found relative to current directory");
				return -1;
			}
			return 0;
		}
		if (!colon)
			break;
		p = colon + 1;
	}
	exec_failure(st, file, EXIT_NOT_FOUND, 0, 1, "executable file not found in $PATH");
	return -1;
}

/* raise_oom_score makes the command the OOM killer's first choice under
 * the sandbox's memory limit, before this process. */
static void raise_oom_score(pid_t pid)
{
	char buf[32] = "", path[64];
	int own = 0, fd = open("/proc/self/oom_score_adj", O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		ssize_t n = read(fd, buf, sizeof buf - 1);
		if (n > 0)
			own = atoi(buf);
		close(fd);
	}
	int v = own + OOM_BOOST > 1000 ? 1000 : own + OOM_BOOST;
	snprintf(path, sizeof path, "/proc/%d/oom_score_adj", (int)pid);
	fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd >= 0) {
		int len = snprintf(buf, sizeof buf, "%d", v);
		if (write(fd, buf, (size_t)len) < 0) {
			/* best effort, as in the Go reaper */
		}
		close(fd);
	}
}

static void forward(pid_t pid, int sig)
{
	if (kill(-pid, sig) != 0)
		kill(pid, sig);
}

/* start forks the command. The child gets its own process group (the
 * terminal's foreground group with --tty), every signal at its default
 * and unblocked, and execs; an exec error comes back over a pipe. */
static pid_t start(char **argv, const char *path, int tty, struct status *st)
{
	int errpipe[2];
	if (pipe2(errpipe, O_CLOEXEC) != 0) {
		exec_failure(st, argv[0], EXIT_CANNOT_EXEC, errno, 0, NULL);
		return -1;
	}
	pid_t pid = fork();
	if (pid < 0) {
		exec_failure(st, argv[0], EXIT_CANNOT_EXEC, errno, 0, NULL);
		close(errpipe[0]);
		close(errpipe[1]);
		return -1;
	}
	if (pid == 0) {
		/* Signals are all blocked here (see main). */
		int err = 0;
		if (setpgid(0, 0) != 0)
			err = errno;
		if (!err && tty && ioctl(0, TIOCSPGRP, &(pid_t){getpid()}) != 0)
			err = errno;
		if (!err) {
			/* The kernel's sigaction, all zero: SIG_DFL. Raw, because
			 * glibc refuses its own signals 32 and 33, which a Go
			 * parent may have passed on as ignored. */
			struct {
				unsigned long handler, flags, restorer, mask;
			} dfl = {0};
			for (int s = 1; s <= 64; s++)
				if (s != SIGKILL && s != SIGSTOP)
					syscall(SYS_rt_sigaction, s, &dfl, NULL, 8);
			sigset_t none;
			sigemptyset(&none);
			sigprocmask(SIG_SETMASK, &none, NULL);
			execv(path, argv);
			err = errno;
		}
		while (write(errpipe[1], &err, sizeof err) < 0 && errno == EINTR)
			;
		_exit(EXIT_CANNOT_EXEC);
	}
	close(errpipe[1]);
	int err = 0;
	ssize_t n;
	while ((n = read(errpipe[0], &err, sizeof err)) < 0 && errno == EINTR)
		;
	close(errpipe[0]);
	if (n == (ssize_t)sizeof err) {
		int ws;
		while (waitpid(pid, &ws, 0) < 0 && errno == EINTR)
			;
		exec_failure(st, argv[0], code_of(err), err, 0, NULL);
		return -1;
	}
	return pid;
}

/* reap collects every exited child; it returns 1 once the command itself
 * has exited, with its status in st. */
static int reap(pid_t cmd, struct status *st)
{
	int done = 0;
	for (;;) {
		int ws;
		pid_t got = waitpid(-1, &ws, WNOHANG);
		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0 && errno != ECHILD)
			supervision_failed("waitpid", errno);
		if (got <= 0)
			return done;
		if (got != cmd)
			continue;
		done = 1;
		if (WIFEXITED(ws)) {
			st->exit_code = WEXITSTATUS(ws);
		} else if (WIFSIGNALED(ws)) {
			st->signal = WTERMSIG(ws);
			st->exit_code = 128 + st->signal;
		}
	}
}

int main(int argc, char **argv)
{
	int lifeline_fd = -1, seccomp_fd = -1, tty = 0;
	if (argc < 2 || strcmp(argv[1], "reaper") != 0) {
		fputs("usage: sbx-init reaper [--status-fd N] [--lifeline-fd N] [--seccomp-fd N] [--tty] -- CMD [ARG...]\n", stderr);
		return EXIT_USAGE;
	}
	/* Flags as Go's flag package reads them: -name or --name, with the
	 * value after "=" or as the next argument; "--" or the first non-flag
	 * ends them. */
	int i = 2;
	for (; i < argc; i++) {
		const char *a = argv[i];
		if (strcmp(a, "--") == 0) {
			i++;
			break;
		}
		if (a[0] != '-' || a[1] == '\0')
			break;
		a += (a[1] == '-') ? 2 : 1;
		char name[32];
		const char *eq = strchr(a, '='), *val = NULL;
		snprintf(name, sizeof name, "%.*s", (int)(eq ? (size_t)(eq - a) : strlen(a)), a);
		if (strcmp(name, "tty") == 0) {
			tty = !eq || strcmp(eq + 1, "true") == 0 || strcmp(eq + 1, "1") == 0;
			continue;
		}
		int *dst = strcmp(name, "status-fd") == 0 ? &status_fd
			 : strcmp(name, "lifeline-fd") == 0 ? &lifeline_fd
			 : strcmp(name, "seccomp-fd") == 0 ? &seccomp_fd : NULL;
		if (!dst) {
			fprintf(stderr, "flag provided but not defined: -%s\n", name);
			return EXIT_USAGE;
		}
		if (eq)
			val = eq + 1;
		else if (i + 1 < argc)
			val = argv[++i];
		else {
			fprintf(stderr, "flag needs an argument: -%s\n", name);
			return EXIT_USAGE;
		}
		*dst = parse_fd(name, val);
	}
	if (i >= argc)
		die(EXIT_USAGE, "%s", "no command given");
	char **cmd = argv + i;

	/* Before anything runs: the command must neither attach to this
	 * process nor inherit the host's pipes. */
	guard();
	if (seccomp_fd >= 0)
		load_seccomp(seccomp_fd);

	/* Every signal stays blocked in this process: those it forwards and
	 * SIGCHLD are read from a signalfd, the rest never act on PID 1. The
	 * child unblocks them all before exec. */
	sigset_t all, wanted;
	sigfillset(&all);
	if (sigprocmask(SIG_SETMASK, &all, NULL) != 0)
		supervision_failed("sigprocmask", errno);
	/* An inherited SIG_IGN for SIGCHLD would have the kernel reap the
	 * command unseen: back to the default, which queues it (blocked). */
	struct sigaction dfl = {.sa_handler = SIG_DFL};
	if (sigaction(SIGCHLD, &dfl, NULL) != 0)
		supervision_failed("sigaction", errno);
	sigemptyset(&wanted);
	for (size_t k = 0; k < sizeof forwarded / sizeof forwarded[0]; k++)
		sigaddset(&wanted, forwarded[k]);
	sigaddset(&wanted, SIGCHLD);
	int sfd = signalfd(-1, &wanted, SFD_CLOEXEC | SFD_NONBLOCK);

	struct status st = {0};
	char path[PATH_MAX];
	pid_t pid = -1;
	if (sfd < 0)
		exec_failure(&st, cmd[0], EXIT_CANNOT_EXEC, errno, 0, NULL);
	else if (look_path(cmd[0], path, sizeof path, &st) == 0)
		pid = start(cmd, path, tty, &st);
	if (pid > 0) {
		raise_oom_score(pid);
		struct pollfd pf[2] = {{.fd = sfd, .events = POLLIN}, {.fd = lifeline_fd, .events = POLLIN}};
		int done = reap(pid, &st); /* it may have exited already */
		while (!done) {
			if (poll(pf, lifeline_fd >= 0 ? 2 : 1, -1) < 0) {
				if (errno == EINTR)
					continue;
				supervision_failed("poll", errno);
			}
			if (lifeline_fd >= 0 && pf[1].revents) {
				char b;
				ssize_t n = read(lifeline_fd, &b, 1);
				if (n <= 0 && !(n < 0 && (errno == EINTR || errno == EAGAIN))) {
					/* The host's sbx is gone: end the sandbox. */
					kill(-1, SIGKILL); /* every process but PID 1 */
					_exit(128 + SIGKILL);
				}
			}
			if (pf[0].revents) {
				struct signalfd_siginfo si;
				ssize_t n;
				while ((n = read(sfd, &si, sizeof si)) == (ssize_t)sizeof si) {
					if ((int)si.ssi_signo == SIGCHLD)
						done = reap(pid, &st) || done;
					else
						forward(pid, (int)si.ssi_signo);
					if (done)
						break;
				}
				if (n < 0 && errno != EAGAIN && errno != EINTR)
					supervision_failed("read signalfd", errno);
			}
		}
	}
	if (status_fd >= 0)
		write_status(status_fd, &st);
	return st.signal ? 128 + st.signal : st.exit_code;
}
