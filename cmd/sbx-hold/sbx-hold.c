/*
 * sbx-hold keeps the host ports a sandbox publishes taken for as long as
 * the sandbox has them, as docker-proxy does: the sockets bound to them
 * (a listening TCP socket, a bound UDP socket) are its descriptors 4 and
 * up, inherited from the sbx process that published the ports. The kernel
 * rules (DNAT) carry the traffic; the sockets only keep a host service
 * started later from binding the port and having its local clients'
 * connections captured by the sandbox.
 *
 *   sbx-hold READY-FD [STATE-DIR]
 *
 * STATE-DIR (the network state directory it holds ports for) only names
 * it, for sbx gc to find holders whose lease is gone.
 * It waits for one byte 'g' on READY-FD, written once the sbx process has
 * recorded this process in the sandbox's network lease; if READY-FD closes
 * first (that process died before recording it), it exits and the ports
 * are free again. Then it waits, doing nothing, until the lease's teardown
 * (sbx rm, the end of a run, sbx gc) kills it with SIGKILL.
 *
 * It runs on the host, outside every sandbox, and reads nothing but
 * READY-FD; the sockets are never read, accepted on or written to.
 */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

int main(int argc, char **argv) {
	if (argc != 2 && argc != 3)
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
	for (;;)
		pause();
}
