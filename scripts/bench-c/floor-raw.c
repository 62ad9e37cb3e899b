/* The floor without a C library: what a process-group wrapper costs when
 * nothing runs before it but the kernel's exec. Its own _start, raw system
 * calls only: vfork, and in the child setpgid(0, 0), execve, exit(127); in
 * the parent wait4, then exit with COMMAND's status (128 + the signal if a
 * signal ended it). Like floor.c it forwards no signal and reaps no other
 * process. No PATH search: COMMAND is a path. x86_64 only.
 *
 * usage: floor-raw COMMAND [ARG]...
 *
 * Built by scripts/bench: gcc -nostdlib -static -O2 -fno-stack-protector.
 */
#if !defined(__x86_64__)
#error "floor-raw: x86_64 only"
#endif

#define SYS_wait4 61
#define SYS_exit 60

static long syscall4(long n, long a, long b, long c, long d)
{
	long ret;
	register long r10 __asm__("r10") = d;

	__asm__ volatile("syscall"
			 : "=a"(ret)
			 : "a"(n), "D"(a), "S"(b), "d"(c), "r"(r10)
			 : "rcx", "r11", "memory");
	return ret;
}

static __attribute__((noreturn)) void sys_exit(int code)
{
	for (;;)
		syscall4(SYS_exit, code, 0, 0, 0);
}

/* vfork, and in the child setpgid(0, 0), execve(path, argv, envp),
 * exit(127), all in one asm statement: the child shares the parent's
 * stack until execve, so it runs no compiled code that could write to
 * it. Returns the child's pid, or -errno if vfork failed. */
static long spawn(const char *path, char **argv, char **envp)
{
	register long rdi __asm__("rdi") = (long)path;
	register long rsi __asm__("rsi") = (long)argv;
	register long rdx __asm__("rdx") = (long)envp;
	long ret;

	__asm__ volatile(
		"mov %%rdi, %%r8\n\t"   /* path, argv, envp kept in r8, r9, r10 */
		"mov %%rsi, %%r9\n\t"
		"mov %%rdx, %%r10\n\t"
		"mov $58, %%eax\n\t"    /* vfork */
		"syscall\n\t"
		"test %%rax, %%rax\n\t"
		"jnz 1f\n\t"
		"xor %%edi, %%edi\n\t"  /* child: setpgid(0, 0) */
		"xor %%esi, %%esi\n\t"
		"mov $109, %%eax\n\t"
		"syscall\n\t"
		"mov %%r8, %%rdi\n\t"   /* execve(path, argv, envp) */
		"mov %%r9, %%rsi\n\t"
		"mov %%r10, %%rdx\n\t"
		"mov $59, %%eax\n\t"
		"syscall\n\t"
		"mov $127, %%edi\n\t"   /* exit(127) */
		"mov $60, %%eax\n\t"
		"syscall\n\t"
		"1:"
		: "=a"(ret), "+r"(rdi), "+r"(rsi), "+r"(rdx)
		:
		: "rcx", "r8", "r9", "r10", "r11", "memory");
	return ret;
}

__attribute__((noreturn, used)) void floor_main(long *sp)
{
	long argc = sp[0];
	char **argv = (char **)(sp + 1);
	char **envp = argv + argc + 1;
	long pid, r;
	int status = 0;

	if (argc < 2)
		sys_exit(125);
	pid = spawn(argv[1], argv + 1, envp);
	if (pid < 0)
		sys_exit(127);
	do
		r = syscall4(SYS_wait4, pid, (long)&status, 0, 0);
	while (r == -4); /* EINTR */
	if (r < 0)
		sys_exit(125);
	if ((status & 0x7f) == 0)
		sys_exit((status >> 8) & 0xff);	/* exited */
	sys_exit(128 + (status & 0x7f));	/* killed by a signal */
}

/* The kernel starts us with argc at (%rsp), argv and envp after it. */
__asm__(".text\n"
	".global _start\n"
	"_start:\n\t"
	"xor %ebp, %ebp\n\t"
	"mov %rsp, %rdi\n\t"
	"and $-16, %rsp\n\t"
	"call floor_main\n\t"
	"hlt\n");
