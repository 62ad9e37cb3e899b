# fish completion for reap(1). Options end at the first word that is not an
# option, or at `--`: the rest is COMMAND, completed as that command's own.

# True once COMMAND has begun before the token being completed. The
# arguments are the options that take a value as the next word.
function __pgwrap_suite_command_started
    set -l tokens (commandline -opc)
    set -e tokens[1]
    set -l skip 0
    set -l vector 0
    for token in $tokens
        if test $skip = 1
            set skip 0
            continue
        end
        # --cleanup-exec's argument vector runs up to a lone ';'.
        if test $vector = 1
            test "$token" = ';'; and set vector 0
            continue
        end
        switch $token
            case --cleanup-exec
                set vector 1
                continue
            case --
                return 0
            case '--*=*'
            case '-*'
                contains -- $token $argv; and set skip 1
            case '*'
                return 0
        end
    end
    return 1
end

# A comma-separated signal list: complete the part after the last comma.
function __pgwrap_suite_signal_list
    set -l token (commandline -ct)
    set -l prefix (string replace -r '[^,]*$' '' -- $token)
    for sig in HUP INT QUIT TERM USR1 USR2 WINCH ALRM CONT PIPE PROF PWR URG IO VTALRM XCPU XFSZ RTMIN RTMAX
        echo $prefix$sig
    end
end

set -l with_value -f --forward -m --map --to --success-status -c --cleanup --cleanup-exec -g --grace -s --signal --cleanup-timeout --stop-delay --events
set -l opts "not __pgwrap_suite_command_started $with_value"
set -l signals 'HUP INT QUIT TERM USR1 USR2 WINCH ALRM CONT PIPE PROF PWR URG IO VTALRM XCPU XFSZ RTMIN RTMAX'
set -l durations '10s 30s 1m 5m inf'

complete -c reap -n $opts -s f -l forward -x -a '(__pgwrap_suite_signal_list)' -d 'Signals passed on to the group of COMMAND'
complete -c reap -n $opts -s m -l map -x -d 'Pass FROM on as TO (FROM:TO, repeatable)'
complete -c reap -n $opts -l to -x -a 'group child' -d 'Send to the whole group or COMMAND alone'
complete -c reap -n $opts -l success-status -x -a '143 130 1' -d 'This status of COMMAND counts as 0 (repeatable)'
complete -c reap -n $opts -s c -l cleanup -x -a '(__fish_complete_command)' -d 'Shell command run once everything is gone'
complete -c reap -n $opts -l cleanup-exec -x -a '(__fish_complete_command)' -d 'The cleanup as an argument vector, ends at ;'
complete -c reap -n $opts -s g -l grace -x -a $durations -d 'Stop signal, this long, then KILL (default 5s)'
complete -c reap -n $opts -s s -l signal -x -a "KILL $signals" -d 'Stop signal for leftovers (default TERM)'
complete -c reap -n $opts -l cleanup-timeout -x -a $durations -d 'Stop the cleanup if it runs longer'
complete -c reap -n $opts -l exec-cleanup -d 'The cleanup replaces the subreaper process'
complete -c reap -n $opts -l keep-orphans -d 'Do not kill leftovers; wait for them'
complete -c reap -n $opts -l cgroup -d "Run COMMAND in a new cgroup v2 below reap's own"
complete -c reap -n $opts -l stop-all -d 'On a stop request, the stop signal to every descendant'
complete -c reap -n $opts -l stop-delay -x -a '1s 5s 30s' -d 'On a stop request, wait this long before passing it on'
complete -c reap -n $opts -l events -r -d 'Event log: a descriptor or a file'
complete -c reap -n $opts -l foreground -d 'Give COMMAND the terminal'
complete -c reap -n $opts -l no-foreground -d 'Never give COMMAND the terminal'
complete -c reap -n $opts -s v -l verbose -d 'One line on stderr per decision'
complete -c reap -n $opts -s h -l help -d 'Show the help and exit'
complete -c reap -n $opts -s V -l version -d 'Show the version and exit'
complete -c reap -x -a "(__fish_complete_subcommand $with_value)"
