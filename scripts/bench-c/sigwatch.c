/* A COMMAND for scripts/bench that reports when SIGTERM reaches it.
 *
 * usage: sigwatch [--stay]
 *
 * Prints "ready PID" on stdout, then sleeps in pause(). On SIGTERM the
 * handler writes "term NS" (CLOCK_MONOTONIC, nanoseconds; the same clock as
 * the harness's) in one write(2), then exits 0 -- or, with --stay, keeps
 * sleeping until something stronger (SIGKILL) ends it.
 */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t stay;

static void on_term(int sig)
{
	struct timespec ts;
	char buf[32], *p = buf + sizeof buf;
	unsigned long long ns;

	(void)sig;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	ns = (unsigned long long)ts.tv_sec * 1000000000ULL + ts.tv_nsec;
	*--p = '\n';
	do {
		*--p = '0' + ns % 10;
		ns /= 10;
	} while (ns);
	p -= 5;
	memcpy(p, "term ", 5);
	(void)!write(1, p, buf + sizeof buf - p);
	if (!stay)
		_exit(0);
}

int main(int argc, char **argv)
{
	struct sigaction sa;
	sigset_t none;

	stay = argc > 1 && strcmp(argv[1], "--stay") == 0;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_term;
	sigaction(SIGTERM, &sa, NULL);
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	printf("ready %d\n", (int)getpid());
	fflush(stdout);
	for (;;)
		pause();
}
