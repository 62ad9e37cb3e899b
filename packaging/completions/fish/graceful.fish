# fish completion for graceful(1). Options end at the first word that is not
# an option, or at `--`: the rest is COMMAND, completed as that command's own.

# True once COMMAND has begun before the token being completed. The
# arguments are the options that take a value as the next word.
function __pgwrap_suite_command_started
    set -l tokens (commandline -opc)
    set -e tokens[1]
    set -l skip 0
    for token in $tokens
        if test $skip = 1
            set skip 0
            continue
        end
        switch $token
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

set -l with_value -t --timeout -g --grace --kill-after -s --signal -k --kill-signal --stop-delay --on -f --forward --pdeathsig --events
set -l opts "not __pgwrap_suite_command_started $with_value"
set -l signals 'HUP INT QUIT TERM USR1 USR2 WINCH ALRM CONT PIPE PROF PWR URG IO VTALRM XCPU XFSZ RTMIN RTMAX'
set -l durations '10s 30s 1m 5m inf'

complete -c graceful -n $opts -s t -l timeout -x -a $durations -d 'Also stop when COMMAND has run this long'
complete -c graceful -n $opts -s g -l grace -x -a $durations -d 'Time between stop and kill signal (default 10s)'
complete -c graceful -n $opts -l kill-after -x -a $durations -d "timeout's name for --grace"
complete -c graceful -n $opts -s s -l signal -x -a "KILL $signals" -d 'Stop signal sent to the group'
complete -c graceful -n $opts -s k -l kill-signal -x -a "KILL $signals" -d 'Sent when the grace is over (default KILL)'
complete -c graceful -n $opts -l stop-delay -x -a '1s 5s 30s' -d 'On a trigger, wait this long before the stop signal'
complete -c graceful -n $opts -l on -x -a '(__pgwrap_suite_signal_list)' -d 'Signals that trigger the stop'
complete -c graceful -n $opts -s f -l forward -x -a '(__pgwrap_suite_signal_list)' -d 'Other signals passed on to the group'
complete -c graceful -n $opts -l events -r -d 'Event log: a descriptor or a file'
complete -c graceful -n $opts -l pdeathsig -x -a "none KILL $signals" -d 'Signal COMMAND gets if graceful dies'
complete -c graceful -n $opts -l preserve-status -d 'After the timeout, exit with the status of COMMAND'
complete -c graceful -n $opts -l stop-all -d 'The stop signal to every process below graceful at once'
complete -c graceful -n $opts -l foreground -d 'Give COMMAND the terminal'
complete -c graceful -n $opts -l no-foreground -d 'Never give COMMAND the terminal (default)'
complete -c graceful -n $opts -s v -l verbose -d 'One line on stderr per decision'
complete -c graceful -n $opts -s h -l help -d 'Show the help and exit'
complete -c graceful -n $opts -s V -l version -d 'Show the version and exit'
complete -c graceful -x -a "(__fish_complete_subcommand $with_value)"
