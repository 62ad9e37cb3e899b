/* The floor of a signal relay: what a wrapper does on the way of a SIGTERM
 * and nothing else. Built static with musl by scripts/bench, for the signal
 * latency only.
 *
 * usage: relay [--fork] COMMAND [ARG]...
 *
 * relay: one process starts COMMAND in a new process group, reads SIGTERM
 * from a signalfd and sends it to COMMAND's group (pgwrap's way).
 *
 * --fork: the process the caller started reads SIGTERM and writes it down a
 * pipe to a second process, COMMAND's parent, which sends it to COMMAND's
 * group (reap's way: the front hands every signal to the back, the one
 * process that signals COMMAND). Both wait in poll(2), as the tools do.
 *
 * Exits 0 when COMMAND has exited (no status is passed on: a floor).
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

/* TERM and CHLD blocked, read from a signalfd. */
static int signals(void)
{
	sigset_t set;

	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGCHLD);
	sigprocmask(SIG_BLOCK, &set, NULL);
	return signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
}

/* COMMAND in a group of its own, with no signal blocked. */
static pid_t start(char **argv)
{
	posix_spawnattr_t attr;
	sigset_t none;
	pid_t pid;

	sigemptyset(&none);
	posix_spawnattr_init(&attr);
	posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK);
	posix_spawnattr_setpgroup(&attr, 0);
	posix_spawnattr_setsigmask(&attr, &none);
	if (posix_spawnp(&pid, argv[0], NULL, &attr, argv, environ) != 0)
		return -1;
	return pid;
}

/* Wait for `fd` (and `in`, if not -1); read what `fd` has: SIGTERM to
 * `out` (a pipe) or to `group`; 1 once `child` has exited. */
static int serve(int fd, int in, int out, pid_t group, pid_t child)
{
	struct pollfd p[2] = {{fd, POLLIN, 0}, {in, POLLIN, 0}};
	struct signalfd_siginfo si;
	int sig;

	poll(p, in < 0 ? 1 : 2, -1);
	while (read(fd, &si, sizeof si) == sizeof si) {
		if (si.ssi_signo == SIGTERM) {
			sig = SIGTERM;
			if (out >= 0)
				(void)!write(out, &sig, sizeof sig);
			else
				kill(-group, SIGTERM);
		}
	}
	if (in >= 0 && (p[1].revents & POLLIN)) {
		if (read(in, &sig, sizeof sig) == sizeof sig)
			kill(-group, sig);
		else
			return 1; /* the front is gone */
	}
	return child > 0 && waitpid(child, NULL, WNOHANG) == child;
}

int main(int argc, char **argv)
{
	int fork_mode = argc > 1 && strcmp(argv[1], "--fork") == 0;
	int pipefd[2], fd;
	pid_t back, pid;

	argv += 1 + fork_mode;
	if (argc < 2 + fork_mode)
		return 125;
	fd = signals();
	if (fd < 0)
		return 125;
	if (!fork_mode) {
		pid = start(argv);
		if (pid < 0)
			return 127;
		while (!serve(fd, -1, -1, pid, pid))
			;
		return 0;
	}
	if (pipe2(pipefd, O_CLOEXEC) != 0)
		return 125;
	back = fork();
	if (back < 0)
		return 125;
	if (back == 0) {
		/* The back: its own signalfd (for CHLD), the pipe, COMMAND. */
		close(pipefd[1]);
		close(fd);
		fd = signals();
		pid = start(argv);
		if (fd < 0 || pid < 0)
			_exit(125);
		while (!serve(fd, pipefd[0], -1, pid, pid))
			;
		_exit(0);
	}
	close(pipefd[0]);
	while (!serve(fd, -1, pipefd[1], 0, back))
		;
	return 0;
}
