# fish completion for chatgpt-credential(1). Installed as
# share/fish/vendor_completions.d/chatgpt-credential.fish.
# Written by `make docs` from the verbs' specs (Sources/CLI/…Command.swift) and the global
# options (Sources/CLI/CommandLineSpec.swift): change those, then run `make docs`.

# Profile names from `status --all --json`: each "profile":"NAME" member (names are letters,
# digits, '.', '_' and '-', so no escape can hide one; a member inside a string would have its
# quotes escaped). Errors print nothing; stdin is /dev/null, so the Secret Service deadline is
# the short one.
function __chatgpt_credential_profiles
    type -q chatgpt-credential; or return 0
    command chatgpt-credential status --all --json --non-interactive </dev/null 2>/dev/null \
        | string match -ar '"profile":"([A-Za-z0-9][A-Za-z0-9._-]{0,63})"' \
        | string match -rv '^"profile":'
end

# The verb on the command line so far (skipping global options and their values), or nothing.
function __chatgpt_credential_verb
    set -l words (commandline -opc)
    set -e words[1]
    while set -q words[1]
        switch $words[1]
            case --profile --store --protocol --broker
                set -e words[1]
            case '-*'
            case '*'
                echo $words[1]
                return 0
        end
        set -e words[1]
    end
    return 1
end

function __chatgpt_credential_no_verb
    not __chatgpt_credential_verb >/dev/null
end

function __chatgpt_credential_verb_is
    set -l verb (__chatgpt_credential_verb); or return 1
    test "$verb" = "$argv[1]"
end

# No verb yet, and the --protocol given so far (plain when none) is $argv[1].
function __chatgpt_credential_no_verb_speaking
    __chatgpt_credential_no_verb; or return 1
    set -l wire plain
    set -l words (commandline -opc)
    while set -q words[1]
        switch $words[1]
            case --protocol
                set -q words[2]; and set wire $words[2]
            case '--protocol=*'
                set wire (string replace -- --protocol= '' $words[1])
        end
        set -e words[1]
    end
    test "$wire" = "$argv[1]"
end

# The verb is $argv[1] and none of its sub-verbs ($argv[2..]) is given yet.
function __chatgpt_credential_sub_verb_due
    __chatgpt_credential_verb_is $argv[1]; or return 1
    for w in (commandline -opc)
        contains -- $w $argv[2..-1]; and return 1
    end
    return 0
end

# After `exec … --`: true, and the command line from the command on.
function __chatgpt_credential_exec_command
    __chatgpt_credential_verb_is exec; or return 1
    set -l words (commandline -opc)
    set -l i (contains -i -- -- $words); or return 1
    set -e words[1..$i]
    set -l escaped
    for w in $words
        set -a escaped (string escape -- $w)
    end
    string join ' ' -- $escaped (commandline -ct)
    return 0 # string join fails when it joined a single word
end

function __chatgpt_credential_in_exec_command
    __chatgpt_credential_exec_command >/dev/null
end

function __chatgpt_credential_complete_exec_command
    complete -C (__chatgpt_credential_exec_command)
end

set -l c chatgpt-credential
complete -c $c -f

# Verbs.
complete -c $c -n '__chatgpt_credential_no_verb_speaking plain' -a login -d 'sign in and store the tokens'
complete -c $c -n '__chatgpt_credential_no_verb_speaking plain' -a get -d 'print a fresh access token (refreshing first when needed)'
complete -c $c -n '__chatgpt_credential_no_verb_speaking plain' -a store -d 'store a credential read from stdin (Codex auth.json or token JSON)'
complete -c $c -n '__chatgpt_credential_no_verb_speaking plain' -a erase -d 'revoke the refresh token and remove the stored credential'
complete -c $c -n '__chatgpt_credential_no_verb_speaking plain' -a status -d 'show who is signed in (no secrets)'
complete -c $c -n '__chatgpt_credential_no_verb_speaking plain' -a usage -d 'show the plan and rate-limit windows (5 h, 7 d) of the account'
complete -c $c -n '__chatgpt_credential_no_verb_speaking plain' -a refresh -d 'refresh now (for timers), printing nothing on stdout'
complete -c $c -n '__chatgpt_credential_no_verb_speaking plain' -a exec -d 'run CMD with CHATGPT_ACCESS_TOKEN and CHATGPT_ACCOUNT_ID set'
complete -c $c -n '__chatgpt_credential_no_verb_speaking plain' -a serve -d 'answer token requests over a UNIX socket (the broker)'
complete -c $c -n '__chatgpt_credential_no_verb_speaking plain' -a help -d 'show help for a verb'
complete -c $c -n '__chatgpt_credential_no_verb_speaking plain' -a sink -d 'keep a file fresh for a program that only reads one (Codex, ChatMock)'
complete -c $c -n '__chatgpt_credential_no_verb_speaking plain' -a version -d 'print the version'
complete -c $c -n '__chatgpt_credential_no_verb_speaking plain' -a doctor -d 'check what a sign-in depends on here (no secrets)'
complete -c $c -n '__chatgpt_credential_no_verb_speaking git' -a 'get store erase'
complete -c $c -n '__chatgpt_credential_no_verb_speaking docker' -a 'get store erase list version'
complete -c $c -n '__chatgpt_credential_verb_is help' -a 'login get store erase status usage refresh exec serve help sink version doctor'
complete -c $c -n '__chatgpt_credential_sub_verb_due sink add list remove run' -a 'add list remove run'

# Global options, before or after the verb (not after the command verb's --).
set -l g 'not __chatgpt_credential_in_exec_command'
complete -c $c -n $g -l profile -x -a '(__chatgpt_credential_profiles)' -d 'which signed-in account (default: default); up to 64 letters, digits, \'.\', \'_\' or \'-\''
complete -c $c -n $g -l store -x -a 'auto secret-service file' -d 'where tokens live (default: auto)'
complete -c $c -n $g -l protocol -x -a 'plain git docker' -d 'how verbs read and write (default: plain)'
complete -c $c -n $g -l non-interactive -d 'never prompt, never open a browser'
complete -c $c -n $g -s v -l verbose -d 'diagnostics on stderr, secrets redacted'
complete -c $c -n $g -l no-cache -d 'skip the access cache in the kernel keyring'
complete -c $c -n $g -l broker -x -d 'client mode: ask the broker at PATH, no store'
complete -c $c -n $g -l version -d 'print the version and exit'
complete -c $c -n $g -s h -l help -d 'show help (also after any verb)'

# login
complete -c $c -n '__chatgpt_credential_verb_is login' -l device -d 'device code flow: shows a URL and a code to enter on any device'
complete -c $c -n '__chatgpt_credential_verb_is login' -l browser -d 'browser flow with a loopback listener on 127.0.0.1:1455 (1457 when busy)'
complete -c $c -n '__chatgpt_credential_verb_is login' -l no-browser -d 'print the sign-in URL, then paste the address the browser ended on'
complete -c $c -n '__chatgpt_credential_verb_is login' -l clipboard -d 'device code flow: also offer the code to the terminal\'s clipboard (OSC 52)'

# get
complete -c $c -n '__chatgpt_credential_verb_is get' -l account-id -d 'print the ChatGPT account id instead'
complete -c $c -n '__chatgpt_credential_verb_is get' -l id-token -d 'print the id token instead'
complete -c $c -n '__chatgpt_credential_verb_is get' -l json -d 'print {access_token, account_id, expires_at, email, plan} as JSON'
complete -c $c -n '__chatgpt_credential_verb_is get' -l header -d 'print \'Authorization: Bearer TOKEN\' and \'ChatGPT-Account-ID: ID\''
complete -c $c -n '__chatgpt_credential_verb_is get' -l env -d 'print export CHATGPT_ACCESS_TOKEN=… and export CHATGPT_ACCOUNT_ID=…, shell-quoted, for eval'
complete -c $c -n '__chatgpt_credential_verb_is get' -l min-ttl -x -d 'refresh unless the token is valid this long (default and minimum: 300)'
complete -c $c -n '__chatgpt_credential_verb_is get' -l force-refresh -d 'refresh now, whatever the expiry'

# store
complete -c $c -n '__chatgpt_credential_verb_is store' -l from-codex -r -F -d 'import Codex\'s credential: PATH, else $CODEX_HOME/auth.json (~/.codex/auth.json) or Codex\'s Secret Service item'

# erase
complete -c $c -n '__chatgpt_credential_verb_is erase' -l no-revoke -d 'do not contact the issuer; only remove the stored credential'

# status
complete -c $c -n '__chatgpt_credential_verb_is status' -l json -d 'machine-readable output'
complete -c $c -n '__chatgpt_credential_verb_is status' -l all -d 'every profile found in either store'

# usage
complete -c $c -n '__chatgpt_credential_verb_is usage' -l json -d 'print {plan, allowed, limit_reached, windows, credits, additional_limits} as JSON'
complete -c $c -n '__chatgpt_credential_verb_is usage' -l all -d 'every profile found in either store, side by side'

# refresh
complete -c $c -n '__chatgpt_credential_verb_is refresh' -l all -d 'every profile found in either store'
complete -c $c -n '__chatgpt_credential_verb_is refresh' -l if-idle -x -d 'only profiles last refreshed at least DAYS days ago (1-365)'

# serve
complete -c $c -n '__chatgpt_credential_verb_is serve' -l socket -r -F -d 'the socket to create, an absolute path (default: broker.sock in the runtime directory, see FILES)'
complete -c $c -n '__chatgpt_credential_verb_is serve' -l idle-exit -x -d 'exit 0 after this long without a connection (default 0 = never; 60 under socket activation)'
complete -c $c -n '__chatgpt_credential_verb_is serve' -l allow-uid -x -d 'also answer processes of this user id, and let them connect (an ACL on the socket, else mode 0666; repeatable)'
complete -c $c -n '__chatgpt_credential_verb_is serve' -l print-socket -d 'print the socket\'s path (the default unless --socket) and exit, serving nothing'

# sink
complete -c $c -n '__chatgpt_credential_verb_is sink' -l format -x -a 'codex chatmock token env json' -d 'add: what the file holds (codex and chatmock: their auth.json with no refresh token)'
complete -c $c -n '__chatgpt_credential_verb_is sink' -l path -r -F -d 'add: the file (default: Codex\'s or ChatMock\'s auth.json; required for token, env, json)'
complete -c $c -n '__chatgpt_credential_verb_is sink' -l take-over -d 'add: import the sign-in the file holds, then keep the file without its refresh token'
complete -c $c -n '__chatgpt_credential_verb_is sink' -l on-change -x -d 'add: run CMD (split on spaces, no shell, 10 s) after each rewrite'
complete -c $c -n '__chatgpt_credential_verb_is sink' -l json -d 'list: as JSON'

# doctor
complete -c $c -n '__chatgpt_credential_verb_is doctor' -l json -d 'the same checks as a JSON array of {check, status, detail, advice}; advice is null for ok'

# exec -- CMD [ARG…]
complete -c $c -n '__chatgpt_credential_verb_is exec; and not __chatgpt_credential_in_exec_command' -a -- -d 'the command follows'
complete -c $c -n __chatgpt_credential_in_exec_command -x -a '(__chatgpt_credential_complete_exec_command)'
