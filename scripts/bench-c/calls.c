/* The floor of pgwrap's system calls: what `pgwrap -- COMMAND` asks of
 * the kernel at start and at COMMAND's end (strace -f), in the same order,
 * and nothing else: no options, no messages, no allocator (COMMAND is
 * found in PATH by musl's execvpe). Built static with musl by
 * scripts/bench, it sets the tools' start-up against what the contract's
 * calls cost, apart from the program that makes them.
 *
 * usage: calls [--graceful | --reap] COMMAND [ARG]...
 *
 * --graceful: graceful's calls instead (the subreaper, the guard's two
 * pipes, the deadline's timerfd, and after COMMAND's end one read of its
 * children file).
 *
 * --reap: reap's calls, in its two processes: the front (the process the
 * caller started, a subreaper) forks the back, which starts COMMAND with
 * graceful's calls and talks to the front over a pipe each way in 12-byte
 * messages: COMMAND started, the cause question (which the front answers),
 * the finish; the front then sees the pipe's end and the back's exit.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;
static char **command;
static int reap;

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
	if (!reap)
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
	if (!reap)
		getppid();
	execvpe(command[0], command, environ);
	_exit(127);
}

static void read_file(const char *path)
{
	char buf[1024];
	/* The system call itself: musl's open adds an fcntl the tools do not make. */
	int fd = (int)syscall(SYS_open, path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return;
	while (read(fd, buf, sizeof buf) > 0)
		;
	close(fd);
}

/* reap's link: a pipe each way, 12-byte messages (kind, PID, status). */
struct msg {
	int kind, pid, status;
};
enum { STARTED = 1, QUESTION = 3, FINISH = 9 };
static int link_in = -1, link_out = -1, guard[2] = {-1, -1};

/* reap's front: the terminal's and the group's questions, the link, the
 * subreaper, its signalfd, the fork. It returns in the back; the front
 * answers the back's question, keeps the finish's status, and exits with it
 * once the link has ended and the back is reaped. */
static void front(const sigset_t *all)
{
	struct signalfd_siginfo got[4];
	int down[2], up[2], sfd, pidfd, status = 0, open = 1;
	struct winsize ws;
	siginfo_t info;
	struct stat st;
	pid_t fg, back;

	fstat(2, &st);
	sigprocmask(SIG_BLOCK, all, NULL);
	ioctl(0, TIOCGPGRP, &fg);
	getpgid(0);
	getpid();
	getpid();
	ioctl(0, TIOCGWINSZ, &ws);
	pipe2(down, O_CLOEXEC | O_NONBLOCK);
	pipe2(up, O_CLOEXEC | O_NONBLOCK);
	getpgid(0);
	getpid();
	prctl(PR_SET_CHILD_SUBREAPER, 1);
	sfd = signalfd(-1, all, SFD_CLOEXEC | SFD_NONBLOCK);
	read(sfd, got, sizeof got);
	back = fork();
	if (back < 0)
		exit(125);
	if (back == 0) {
		close(down[1]);
		close(up[0]);
		close(sfd);
		setsid();
		link_in = down[0];
		link_out = up[1];
		return;
	}
	pidfd = (int)syscall(SYS_pidfd_open, back, 0);
	close(down[0]);
	close(up[1]);
	read(sfd, got, sizeof got);
	memset(&info, 0, sizeof info);
	waitid(P_PID, back, &info, WNOHANG | WEXITED | WSTOPPED | WCONTINUED | WNOWAIT);
	read(up[0], got, sizeof got);
	while (open) {
		struct pollfd fds[3] = {{sfd, POLLIN, 0}, {pidfd, POLLIN, 0}, {up[0], POLLIN, 0}};
		struct msg m;
		ssize_t n;

		ppoll(fds, 3, NULL, NULL);
		for (ssize_t k = read(sfd, got, sizeof got), i = 0; i < k / (ssize_t)sizeof got[0]; i++)
			if (got[i].ssi_signo != SIGCHLD)
				kill(back, (int)got[i].ssi_signo);
		n = read(up[0], &m, sizeof m);
		if (n == 0) {
			close(up[0]);
			open = 0;
		} else if (n == (ssize_t)sizeof m && m.kind == QUESTION) {
			struct msg answer = {0, 0, 0};

			read(sfd, got, sizeof got);
			write(down[1], &answer, sizeof answer);
		} else if (n == (ssize_t)sizeof m && m.kind == FINISH) {
			status = m.status;
		}
	}
	{
		struct pollfd fds[2] = {{sfd, POLLIN, 0}, {pidfd, POLLIN, 0}};

		ppoll(fds, 2, NULL, NULL);
	}
	read(sfd, got, sizeof got);
	memset(&info, 0, sizeof info);
	waitid(P_PID, back, &info, WNOHANG | WEXITED | WSTOPPED | WCONTINUED | WNOWAIT);
	memset(&info, 0, sizeof info);
	waitid(P_PID, back, &info, WEXITED);
	close(pidfd);
	exit(status);
}

/* reap's back, after COMMAND's end: the question, the reap, the search for
 * what is left, the answer, the finish. */
static int finish(pid_t pid, int pidfd, int sfd)
{
	struct msg question = {QUESTION, 0, 0}, answer, done = {FINISH, 0, 0};
	struct signalfd_siginfo got[4];
	siginfo_t info;

	getpid();
	memset(&info, 0, sizeof info);
	waitid(P_PID, pid, &info, WNOHANG | WEXITED | WSTOPPED | WCONTINUED | WNOWAIT);
	write(link_out, &question, sizeof question);
	memset(&info, 0, sizeof info);
	waitid(P_PID, pid, &info, WNOHANG | WEXITED);
	done.status = info.si_code == CLD_EXITED ? info.si_status : 128 + info.si_status;
	close(pidfd);
	waitid(P_ALL, 0, &info, WNOHANG | WEXITED | WNOWAIT);
	waitid(P_ALL, 0, &info, WNOHANG | WEXITED | WNOWAIT);
	read(sfd, got, sizeof got);
	while (read(link_in, &answer, sizeof answer) < 0) {
		struct pollfd fds[1] = {{link_in, POLLIN, 0}};

		ppoll(fds, 1, NULL, NULL);
	}
	write(link_out, &done, sizeof done);
	close(sfd);
	close(link_in);
	close(link_out);
	close(guard[0]);
	close(guard[1]);
	return 0;
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
	} else if (argc > 1 && strcmp(argv[1], "--reap") == 0) {
		graceful = reap = 1;
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
	if (reap)
		front(&all);
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
		guard[0] = back[0];
		guard[1] = cleanup[0];
		if (reap) {
			read(sfd, got, sizeof got);
			read(link_in, got, sizeof got);
		}
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
	if (reap) {
		struct msg started = {STARTED, pid, 0};

		write(link_out, &started, sizeof started);
	}
	getsid(0);
	if (!reap)
		read(sfd, got, sizeof got);
	memset(&info, 0, sizeof info);
	waitid(P_PID, pid, &info, WNOHANG | WEXITED | WSTOPPED | WCONTINUED | WNOWAIT);
	for (;;) {
		struct pollfd fds[3] = {{sfd, POLLIN, 0}, {pidfd, POLLIN, 0}, {link_in, POLLIN, 0}};

		memset(&info, 0, sizeof info);
		waitid(P_PID, pid, &info, WNOHANG | WEXITED | WNOWAIT);
		if (info.si_pid == pid)
			break;
		ppoll(fds, reap ? 3 : 2, NULL, NULL);
		if (reap && !fds[0].revents)
			continue;
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
	if (reap)
		return finish(pid, pidfd, sfd);
	memset(&info, 0, sizeof info);
	waitid(P_PID, pid, &info, WEXITED);
	return info.si_code == CLD_EXITED ? info.si_status : 128 + info.si_status;
}
