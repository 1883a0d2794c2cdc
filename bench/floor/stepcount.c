// stepcount: single-steps a program under ptrace and counts its user-space
// instructions, cpuid (a VM exit on every hypervisor), rdtsc and syscall
// instructions.
//
//	gcc -O2 -o stepcount stepcount.c && ./stepcount /bin/busybox true
#include <errno.h>
#include <stdio.h>
#include <sys/ptrace.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv) {
	if (argc < 2) {
		fprintf(stderr, "usage: stepcount PROGRAM [ARGS]\n");
		return 2;
	}
	pid_t p = fork();
	if (p == 0) {
		ptrace(PTRACE_TRACEME, 0, 0, 0);
		execv(argv[1], argv + 1);
		_exit(127);
	}
	int st;
	waitpid(p, &st, 0);
	long steps = 0, cpuid = 0, rdtsc = 0, sysc = 0;
	for (;;) {
		struct user_regs_struct r;
		ptrace(PTRACE_GETREGS, p, 0, &r);
		errno = 0;
		long w = ptrace(PTRACE_PEEKTEXT, p, r.rip, 0);
		if (!errno) {
			unsigned char b0 = w & 0xff, b1 = (w >> 8) & 0xff;
			cpuid += b0 == 0x0f && b1 == 0xa2;
			rdtsc += b0 == 0x0f && b1 == 0x31;
			sysc += b0 == 0x0f && b1 == 0x05;
		}
		steps++;
		if (ptrace(PTRACE_SINGLESTEP, p, 0, 0) < 0)
			break;
		waitpid(p, &st, 0);
		if (WIFEXITED(st) || WIFSIGNALED(st))
			break;
	}
	printf("%s: %ld instructions, %ld cpuid, %ld rdtsc, %ld syscall\n", argv[1], steps, cpuid, rdtsc, sysc);
	return 0;
}
