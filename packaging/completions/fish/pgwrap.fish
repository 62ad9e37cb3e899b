# fish completion for pgwrap(1). Options end at the first word that is not an
# option, or at `--`: the rest is COMMAND, completed as that command's own.

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

set -l with_value -f --forward -i --ignore -m --map --to --pdeathsig --events
set -l opts "not __pgwrap_suite_command_started $with_value"
set -l signals 'HUP INT QUIT TERM USR1 USR2 WINCH ALRM CONT PIPE PROF PWR URG IO VTALRM XCPU XFSZ RTMIN RTMAX'

complete -c pgwrap -n $opts -s f -l forward -x -a '(__pgwrap_suite_signal_list)' -d 'Signals passed on (replaces the default)'
complete -c pgwrap -n $opts -s i -l ignore -x -a '(__pgwrap_suite_signal_list)' -d 'Remove these from the forward set'
complete -c pgwrap -n $opts -s m -l map -x -d 'Pass FROM on as TO (FROM:TO, repeatable)'
complete -c pgwrap -n $opts -l to -x -a 'group child' -d 'Send to the whole group or COMMAND alone'
complete -c pgwrap -n $opts -l setsid -d 'New session instead of a new process group'
complete -c pgwrap -n $opts -l foreground -d 'Give COMMAND the terminal'
complete -c pgwrap -n $opts -l no-foreground -d 'Never give COMMAND the terminal'
complete -c pgwrap -n $opts -l events -r -d 'Event log: a descriptor or a file'
complete -c pgwrap -n $opts -l pdeathsig -x -a "none KILL $signals" -d 'Signal COMMAND gets if pgwrap dies'
complete -c pgwrap -n $opts -s v -l verbose -d 'One line on stderr per decision'
complete -c pgwrap -n $opts -s h -l help -d 'Show the help and exit'
complete -c pgwrap -n $opts -s V -l version -d 'Show the version and exit'
complete -c pgwrap -x -a "(__fish_complete_subcommand $with_value)"
