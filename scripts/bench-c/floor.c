/* The floor of a process-group wrapper: posix_spawn COMMAND into a new
 * process group, wait for it, exit with its status. Nothing else: no signal
 * handling, no reaping of others. Built static by scripts/bench.
 *
 * usage: floor [--fork] COMMAND [ARG]...
 *
 * --fork: the same from a forked second process, which the first waits
 * for: the floor of a wrapper made of two processes (as reap is, outside
 * PID 1, for its guarantee).
 */
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

int main(int argc, char **argv)
{
	posix_spawnattr_t attr;
	pid_t pid;
	int status;

	if (argc > 1 && strcmp(argv[1], "--fork") == 0) {
		argc--;
		argv++;
		pid = fork();
		if (pid < 0)
			return 125;
		if (pid > 0) {
			if (waitpid(pid, &status, 0) < 0)
				return 125;
			return WIFEXITED(status) ? WEXITSTATUS(status) : 125;
		}
	}
	if (argc < 2)
		return 125;
	posix_spawnattr_init(&attr);
	posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
	posix_spawnattr_setpgroup(&attr, 0);
	if (posix_spawnp(&pid, argv[1], NULL, &attr, argv + 1, environ) != 0)
		return 127;
	if (waitpid(pid, &status, 0) < 0)
		return 125;
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}
