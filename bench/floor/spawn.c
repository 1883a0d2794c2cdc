// spawn: the fork+exec floor. posix_spawn (vfork + exec) of PATH, then
// waitpid, N times; prints p10/p50/p90 in microseconds.
//
//	gcc -O2 -static -o spawn spawn.c && ./spawn 2000 /bin/busybox true
#define _GNU_SOURCE
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>

extern char **environ;

static double now(void) {
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static int cmp(const void *a, const void *b) {
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
	if (argc < 3) {
		fprintf(stderr, "usage: spawn N PATH [ARGV0]\n");
		return 2;
	}
	int n = atoi(argv[1]);
	double *d = malloc(n * sizeof(double));
	char *av[] = {argc > 3 ? argv[3] : argv[2], NULL};
	for (int i = 0; i < n; i++) {
		double t0 = now();
		pid_t p;
		int st;
		if (posix_spawn(&p, argv[2], NULL, NULL, av, environ) != 0) {
			perror("posix_spawn");
			return 1;
		}
		waitpid(p, &st, 0);
		d[i] = now() - t0;
	}
	qsort(d, n, sizeof(double), cmp);
	printf("%s: p10 %.0f p50 %.0f p90 %.0f us\n", argv[2], d[n / 10], d[n / 2], d[n * 9 / 10]);
	return 0;
}
