// cpuid: the cost of one cpuid instruction (a VM exit under a hypervisor).
//
//	gcc -O2 -o cpuid cpuid.c && ./cpuid
#include <cpuid.h>
#include <stdio.h>
#include <time.h>

static double now(void) {
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e9 + t.tv_nsec;
}

int main(void) {
	unsigned a, b, c, d;
	int n = 2000;
	double t0 = now();
	for (int i = 0; i < n; i++)
		__cpuid_count(4, i & 3, a, b, c, d);
	printf("cpuid: %.2f us each\n", (now() - t0) / n / 1000);
	return 0;
}
