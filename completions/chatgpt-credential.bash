# bash completion for chatgpt-credential(1)                              -*- shell-script -*-
# Installed as share/bash-completion/completions/chatgpt-credential; also works without the
# bash-completion package (source it). Written by `make docs` from the verbs' specs
# (Sources/CLI/…Command.swift) and the global options (Sources/CLI/CommandLineSpec.swift):
# change those, then run `make docs`.

# Profile names from `status --all --json`: each "profile":"NAME" member (names are letters,
# digits, '.', '_' and '-', so no escape can hide one; a member inside a string would have its
# quotes escaped). Errors print nothing; stdin is /dev/null, so the Secret Service deadline is
# the short one.
_chatgpt_credential_profiles()
{
    local json name
    json=$(command chatgpt-credential status --all --json --non-interactive </dev/null 2>/dev/null)
    while [[ $json =~ \"profile\":\"([A-Za-z0-9][A-Za-z0-9._-]{0,63})\" ]]; do
        name=${BASH_REMATCH[1]}
        printf '%s\n' "$name"
        json=${json#*"${BASH_REMATCH[0]}"}
    done
}

# File names for an option's PATH value, the `--opt=` prefix put back; one name per line,
# so names with spaces stay whole.
_chatgpt_credential_files()
{
    local IFS=$'\n'
    COMPREPLY=($(compgen -f -- "$1"))
    [[ -n $2 ]] && COMPREPLY=("${COMPREPLY[@]/#/$2}")
    compopt -o filenames 2>/dev/null
}

_chatgpt_credential()
{
    local cur=${COMP_WORDS[COMP_CWORD]} prev= prefix=
    local verbs='login get store erase status usage refresh exec serve help sink version doctor'
    local globals='--profile --store --protocol --non-interactive --verbose -v --no-cache --broker --version --help -h'
    (( COMP_CWORD > 0 )) && prev=${COMP_WORDS[COMP_CWORD-1]}
    COMPREPLY=()

    # --opt=value: with '=' in COMP_WORDBREAKS (the default), three words: --opt, '=' and the value.
    if [[ $cur == = && $prev == --* ]]; then
        cur=
    elif [[ $prev == = ]] && (( COMP_CWORD > 1 )); then
        prev=${COMP_WORDS[COMP_CWORD-2]}
    elif [[ $cur == --*=* ]]; then
        # '=' is not a word break here: complete the value, keep the '--opt=' prefix.
        prev=${cur%%=*}
        prefix=$prev=
        cur=${cur#*=}
    fi

    # Find the verb (and, after a command verb, the "--" after which the command starts).
    local i w verb= verbat=0 wire=plain dashdash=
    for (( i = 1; i < COMP_CWORD; i++ )); do
        w=${COMP_WORDS[i]}
        if [[ -n $verb ]]; then
            [[ $verb == exec && $w == -- ]] && { dashdash=$i; break; }
            continue
        fi
        case $w in
            --profile|--store|--protocol|--broker)
                (( i++ ))
                [[ ${COMP_WORDS[i]} == = ]] && (( i++ ))
                [[ $w == --protocol ]] && wire=${COMP_WORDS[i]} ;;
            --protocol=*) wire=${w#*=} ;;
            -*|=) ;;
            *) verb=$w verbat=$i ;;
        esac
    done

    # After the command verb's --: complete the command as the shell would.
    if [[ -n $dashdash ]]; then
        if (( COMP_CWORD == dashdash + 1 )); then
            COMPREPLY=($(compgen -c -- "$cur" | sort -u))
        elif declare -F _command_offset >/dev/null; then
            _command_offset $(( dashdash + 1 ))
        else
            COMPREPLY=($(compgen -f -- "$cur"))
        fi
        return 0
    fi

    # Values of options.
    local values= offer= IFS=$' \t\n'
    case $prev in
        --broker|--min-ttl|--if-idle|--idle-exit|--allow-uid|--on-change) return 0 ;; # typed, nothing to offer
        --profile) offer=1 values=$(_chatgpt_credential_profiles) ;;
        --store) offer=1 values='auto secret-service file' ;;
        --protocol) offer=1 values='plain git docker' ;;
        --from-codex)
            if [[ $verb == store && ( -n $prefix || $cur != -* ) ]]; then
                _chatgpt_credential_files "$cur" "$prefix"
                return 0
            fi ;;
        --socket)
            if [[ $verb == serve ]]; then
                _chatgpt_credential_files "$cur" "$prefix"
                return 0
            fi ;;
        --format)
            [[ $verb == sink ]] && offer=1 values='codex chatmock token env json' ;;
        --path)
            if [[ $verb == sink ]]; then
                _chatgpt_credential_files "$cur" "$prefix"
                return 0
            fi ;;
    esac
    if [[ -n $offer ]]; then
        COMPREPLY=($(compgen -W "$values" -- "$cur"))
        [[ -n $prefix ]] && COMPREPLY=("${COMPREPLY[@]/#/$prefix}")
        return 0
    fi

    # The verb's sub-verbs, offered as its first word until one is given.
    local subs= sub=
    case $verb in
        sink) subs='add list remove run' ;;
    esac
    for (( i = verbat + 1; i < COMP_CWORD; i++ )); do
        [[ -n $subs && " $subs " == *" ${COMP_WORDS[i]} "* ]] && { sub=${COMP_WORDS[i]}; break; }
    done

    # Options of the verb, plus the global options.
    local opts=$globals
    case $verb in
        login) opts+=" --device --browser --no-browser --clipboard" ;;
        get) opts+=" --account-id --id-token --json --header --env --min-ttl --force-refresh" ;;
        store) opts+=" --from-codex" ;;
        erase) opts+=" --no-revoke" ;;
        status) opts+=" --json --all" ;;
        usage) opts+=" --json --all" ;;
        refresh) opts+=" --all --if-idle" ;;
        exec) opts+=" --" ;;
        serve) opts+=" --socket --idle-exit --allow-uid --print-socket" ;;
        sink) opts+=" --format --path --take-over --on-change --json" ;;
        doctor) opts+=" --json" ;;
    esac

    if [[ $cur == -* ]]; then
        COMPREPLY=($(compgen -W "$opts" -- "$cur"))
    elif [[ -z $verb ]]; then
        case $wire in
            git) COMPREPLY=($(compgen -W 'get store erase' -- "$cur")) ;;
            docker) COMPREPLY=($(compgen -W 'get store erase list version' -- "$cur")) ;;
            *) COMPREPLY=($(compgen -W "$verbs" -- "$cur")) ;;
        esac
    elif [[ -n $subs && -z $sub ]]; then
        COMPREPLY=($(compgen -W "$subs" -- "$cur"))
    elif [[ ( $verb == help ) && $prev == "$verb" ]]; then
        COMPREPLY=($(compgen -W "$verbs" -- "$cur"))
    fi
    return 0
} &&
    complete -F _chatgpt_credential chatgpt-credential

# ex: filetype=sh
