# tiny: the smallest static program (exit(0)), the kernel's own fork+exec
# floor without any libc start-up.
#	gcc -nostdlib -static -o tiny tiny.S
.globl _start
_start:
	mov $60, %eax
	xor %edi, %edi
	syscall
