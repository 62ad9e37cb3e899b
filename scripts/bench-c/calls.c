/* The floor of pgwrap's system calls: what `pgwrap -- COMMAND` asks of
 * the kernel at start and at COMMAND's end (strace -f), in the same order,
 * and nothing else: no options, no messages, no allocator (COMMAND is
 * found in PATH by musl's execvpe). Built static with musl by
 * scripts/bench, it sets the tools' start-up against what the contract's
 * calls cost, apart from the program that makes them.
 *
 * usage: calls [--graceful] COMMAND [ARG]...
 *
 * --graceful: graceful's calls instead (the subreaper, the guard's two
 * pipes, its own /proc/self/stat, the deadline's timerfd, and after
 * COMMAND's end one read of its children file).
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;
static char **command;

static void handler(int sig) { (void)sig; }

/* pgwrap's child: its group, the parent-death signal, the job-control
 * signals handled (each looked at first), the mask cleared, the exec. */
static int child(void *arg)
{
	static const int job[3] = {SIGTSTP, SIGTTIN, SIGTTOU};
	struct sigaction sa = {0}, old;
	sigset_t set;

	(void)arg;
	setpgid(0, 0);
	getpid();
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	sigpending(&set);
	sa.sa_handler = handler;
	sa.sa_flags = SA_RESTART;
	for (int i = 0; i < 3; i++) {
		sigaction(job[i], NULL, &old);
		sigaction(job[i], &sa, NULL);
	}
	sigemptyset(&set);
	sigprocmask(SIG_SETMASK, &set, NULL);
	getppid();
	execvpe(command[0], command, environ);
	_exit(127);
}

static void read_file(const char *path)
{
	char buf[1024];
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return;
	while (read(fd, buf, sizeof buf) > 0)
		;
	close(fd);
}

int main(int argc, char **argv)
{
	static const int forwarded[7] = {SIGHUP, SIGINT, SIGQUIT, SIGUSR1, SIGUSR2, SIGTERM, SIGWINCH};
	struct signalfd_siginfo got[4];
	struct sigaction old;
	siginfo_t info;
	sigset_t all;
	int graceful = 0, sfd, pidfd = -1;
	char *stack;
	pid_t pid;

	if (argc > 1 && strcmp(argv[1], "--graceful") == 0) {
		graceful = 1;
		argc--;
		argv++;
	}
	if (argc < 2)
		return 125;
	command = argv + 1;
	sigfillset(&all);
	sigprocmask(SIG_BLOCK, &all, NULL);
	sigaction(SIGCHLD, NULL, &old);
	for (int i = 0; i < 7; i++)
		sigaction(forwarded[i], NULL, &old);
	sfd = signalfd(-1, &all, SFD_CLOEXEC | SFD_NONBLOCK);
	read(sfd, got, sizeof got);
	if (graceful) {
		int back[2], cleanup[2];
		struct stat st;

		prctl(PR_SET_CHILD_SUBREAPER, 1);
		pipe2(back, O_CLOEXEC | O_NONBLOCK);
		pipe2(cleanup, O_CLOEXEC | O_NONBLOCK);
		close(back[1]);
		close(cleanup[1]);
		fstat(back[0], &st);
		fstat(cleanup[0], &st);
		read_file("/proc/self/stat");
		getpid();
	} else {
		pid_t fg;

		ioctl(0, TIOCGPGRP, &fg);
		getpgid(0);
	}
	getpid();
	stack = mmap(NULL, 128 * 1024, PROT_READ | PROT_WRITE,
		     MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
	if (stack == MAP_FAILED)
		return 125;
	mprotect(stack, 64 * 1024, PROT_NONE);
	pid = clone(child, stack + 128 * 1024, CLONE_VM | CLONE_VFORK | CLONE_PIDFD | SIGCHLD,
		    NULL, &pidfd);
	munmap(stack, 128 * 1024);
	if (pid < 0)
		return 125;
	if (graceful)
		timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
	getsid(0);
	read(sfd, got, sizeof got);
	memset(&info, 0, sizeof info);
	waitid(P_PID, pid, &info, WNOHANG | WEXITED | WSTOPPED | WCONTINUED | WNOWAIT);
	for (;;) {
		struct pollfd fds[2] = {{sfd, POLLIN, 0}, {pidfd, POLLIN, 0}};

		memset(&info, 0, sizeof info);
		waitid(P_PID, pid, &info, WNOHANG | WEXITED | WNOWAIT);
		if (info.si_pid == pid)
			break;
		ppoll(fds, 2, NULL, NULL);
		/* A signal read is passed on to COMMAND's group, as pgwrap's
		 * --forward passes on TERM and INT: the tree kill ends. */
		for (ssize_t n = read(sfd, got, sizeof got), i = 0; i < n / (ssize_t)sizeof got[0]; i++)
			if (got[i].ssi_signo != SIGCHLD)
				kill(-pid, (int)got[i].ssi_signo);
	}
	if (graceful) {
		char path[64];

		snprintf(path, sizeof path, "/proc/self/task/%d/children", (int)getpid());
		read_file(path);
	}
	memset(&info, 0, sizeof info);
	waitid(P_PID, pid, &info, WEXITED);
	return info.si_code == CLD_EXITED ? info.si_status : 128 + info.si_status;
}
