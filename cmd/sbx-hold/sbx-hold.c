/*
 * sbx-hold keeps the host ports a sandbox publishes taken for as long as
 * the sandbox has them, as docker-proxy does: the sockets bound to them
 * (a listening TCP socket, a bound UDP socket) are its descriptors 4 and
 * up, inherited from the sbx process that published the ports. The kernel
 * rules (DNAT) carry the traffic; the sockets only keep a host service
 * started later from binding the port and having its local clients'
 * connections captured by the sandbox.
 *
 *   sbx-hold READY-FD [STATE-DIR [STANDBY-FD]]
 *
 * STATE-DIR (the network state directory it holds ports for) only names
 * it, for sbx gc to find holders whose lease is gone.
 * It waits for one byte 'g' on READY-FD, written once the sbx process has
 * recorded this process in the sandbox's network lease; if READY-FD closes
 * first (that process died before recording it), it exits and the ports
 * are free again. Then it waits, doing nothing, until the lease's teardown
 * (sbx rm, the end of a run, sbx gc) kills it with SIGKILL.
 *
 * With STANDBY-FD (a warm pool's member, which publishes no port yet), it
 * is started with the member and receives the sockets later, from the sbx
 * process that claims the member: STANDBY-FD is a listening unix socket of
 * the state directory; it accepts connections until one brings descriptors
 * (SCM_RIGHTS), keeps them, and closes the socket.
 *
 * It runs on the host, outside every sandbox, and reads nothing but
 * READY-FD and STANDBY-FD's connections; the sockets are never read,
 * accepted on or written to.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

/* MAX_FDS bounds the descriptors one claim hands over (the sbx process
 * starts a holder of its own for more). */
#define MAX_FDS 64

/* receive accepts connections on lfd until one brings descriptors, which
 * stay open. */
static void receive(int lfd) {
	for (;;) {
		int c = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
		if (c < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			return;
		}
		char b;
		union {
			char buf[CMSG_SPACE(sizeof(int) * MAX_FDS)];
			struct cmsghdr align;
		} u;
		struct iovec iov = {.iov_base = &b, .iov_len = 1};
		struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf, .msg_controllen = sizeof(u.buf)};
		ssize_t n;
		do
			n = recvmsg(c, &m, MSG_CMSG_CLOEXEC);
		while (n < 0 && errno == EINTR);
		int got = 0;
		if (n > 0)
			for (struct cmsghdr *h = CMSG_FIRSTHDR(&m); h; h = CMSG_NXTHDR(&m, h))
				if (h->cmsg_level == SOL_SOCKET && h->cmsg_type == SCM_RIGHTS)
					got = 1;
		close(c);
		if (got)
			return;
	}
}

int main(int argc, char **argv) {
	if (argc < 2 || argc > 4)
		return 2;
	int ready = atoi(argv[1]);
	/* A terminal's signals never reach it (it has a session of its own),
	 * but a process group's kill from its starter must not end it early. */
	signal(SIGINT, SIG_IGN);
	signal(SIGHUP, SIG_IGN);
	signal(SIGPIPE, SIG_IGN);
	signal(SIGQUIT, SIG_IGN);
	if (chdir("/") != 0)
		return 1;
	char c = 0;
	ssize_t n;
	do
		n = read(ready, &c, 1);
	while (n < 0 && errno == EINTR);
	if (n != 1 || c != 'g')
		return 1;
	close(ready);
	if (argc == 4) {
		int lfd = atoi(argv[3]);
		receive(lfd);
		close(lfd);
	}
	for (;;)
		pause();
}
