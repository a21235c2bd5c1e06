import CLI
import HelperProtocols

/// What the three shells' completions are made of, read from the registry: the verbs, the global
/// options, each verb's options and operands, and git's and docker's protocol verbs.
enum CompletionData {
    static var program: String { CommandLineSpec.programName }
    static var verbs: [VerbSpec] { CommandLineSpec.verbs }
    static var verbNames: String { verbs.map(\.name).joined(separator: " ") }
    static var globals: [OptionSpec] { CommandLineSpec.globalOptions }
    static var gitVerbs: String { GitCredentialProtocol.Verb.allCases.map(\.rawValue).joined(separator: " ") }
    static var dockerVerbs: String { DockerCredentialProtocol.Verb.allCases.map(\.rawValue).joined(separator: " ") }

    /// The global options that take a value (skipped with it when looking for the verb).
    static var globalsWithValue: [String] { globals.filter { $0.value != nil }.map(\.long) }

    /// The verb whose operands are a command (`exec`): the completions hand the words after its
    /// `--` to the shell's own completion.
    static func commandVerb() throws -> VerbSpec? {
        let found = verbs.filter { $0.operands == .command }
        guard found.count <= 1 else { throw DocsError("the completions handle one verb whose operands are a command, not \(found.map(\.name))") }
        return found.first
    }

    /// The verbs whose operand is a verb's name (`help VERB`).
    static var verbNameVerbs: [VerbSpec] { verbs.filter { $0.operands == .verbName } }

    /// The header every completion file starts with (after zsh's `#compdef`).
    static func header(_ shell: String, installedAs: String) -> String {
        """
        # \(shell) completion for \(program)(1). Installed as \(installedAs).
        # Written by `make docs` from the verbs' specs (Sources/CLI/…Command.swift) and the global
        # options (Sources/CLI/CommandLineSpec.swift): change those, then run `make docs`.

        """
    }

    /// How the profile names are found, said once for the three shells.
    static let profilesComment = """
        # Profile names from `status --all --json`: each "profile":"NAME" member (names are letters,
        # digits, '.', '_' and '-', so no escape can hide one; a member inside a string would have its
        # quotes escaped). Errors print nothing; stdin is /dev/null, so the Secret Service deadline is
        # the short one.

        """

    /// `text` inside single quotes for a POSIX shell or zsh.
    static func singleQuoted(_ text: String) -> String {
        "'" + text.replacing("'", with: "'\\''") + "'"
    }
}

// MARK: bash

enum BashCompletion {
    static func text() throws -> String {
        typealias D = CompletionData
        let commandVerb = try D.commandVerb()
        var globals: [String] = []
        for o in D.globals { globals.append(o.long); if let s = o.short { globals.append("-\(s)") } }

        // Values: one `case` arm per option that takes one.
        var arms: [String] = []
        var typed: [String] = [] // a value the person types: nothing to offer
        func offer(_ o: OptionSpec) -> String? {
            if !o.choices.isEmpty { return "offer=1 values=\(D.singleQuoted(o.choices.joined(separator: " ")))" }
            if o.completion == .profiles { return "offer=1 values=$(_chatgpt_credential_profiles)" }
            return nil
        }
        for o in D.globals where o.value != nil {
            if let action = offer(o) { arms.append("        \(o.long)) \(action) ;;") } else { typed.append(o.long) }
        }
        var verbOptions: [(long: String, verbs: [(VerbSpec, OptionSpec)])] = []
        for v in D.verbs {
            for o in v.options where o.value != nil {
                if let i = verbOptions.firstIndex(where: { $0.long == o.long }) { verbOptions[i].verbs.append((v, o)) }
                else { verbOptions.append((o.long, [(v, o)])) }
            }
        }
        for (long, uses) in verbOptions {
            if uses.allSatisfy({ $0.1.choices.isEmpty && $0.1.completion == .none }) { typed.append(long); continue }
            var arm = ["        \(long))"]
            for (v, o) in uses {
                if let action = offer(o) {
                    arm.append("            [[ $verb == \(v.name) ]] && \(action)")
                } else if o.completion == .files {
                    // An optional value: files unless the word looks like the next option.
                    let when = o.valueOptional ? "$verb == \(v.name) && ( -n $prefix || $cur != -* )" : "$verb == \(v.name)"
                    arm += ["            if [[ \(when) ]]; then",
                            "                _chatgpt_credential_files \"$cur\" \"$prefix\"",
                            "                return 0",
                            "            fi"]
                } else {
                    arm.append("            [[ $verb == \(v.name) ]] && return 0")
                }
            }
            arms.append(arm.joined(separator: "\n") + " ;;")
        }
        if !typed.isEmpty { arms.insert("        \(typed.joined(separator: "|"))) return 0 ;; # typed, nothing to offer", at: 0) }

        var verbArms: [String] = []
        for v in D.verbs {
            var words = v.options.map(\.long)
            if v.operands == .command { words.append("--") }
            if !words.isEmpty { verbArms.append("        \(v.name)) opts+=\" \(words.joined(separator: " "))\" ;;") }
        }

        var subVerbArms: [String] = []
        for v in D.verbs {
            if case .subcommands(let subs) = v.operands { subVerbArms.append("        \(v.name)) subs=\(D.singleQuoted(subs.joined(separator: " "))) ;;") }
        }

        var s = """
        # bash completion for \(D.program)(1)                              -*- shell-script -*-
        # Installed as share/bash-completion/completions/\(D.program); also works without the
        # bash-completion package (source it). Written by `make docs` from the verbs' specs
        # (Sources/CLI/…Command.swift) and the global options (Sources/CLI/CommandLineSpec.swift):
        # change those, then run `make docs`.


        """
        s += D.profilesComment
        s += """
        _chatgpt_credential_profiles()
        {
            local json name
            json=$(command \(D.program) status --all --json --non-interactive </dev/null 2>/dev/null)
            while [[ $json =~ \\"profile\\":\\"([A-Za-z0-9][A-Za-z0-9._-]{0,63})\\" ]]; do
                name=${BASH_REMATCH[1]}
                printf '%s\\n' "$name"
                json=${json#*"${BASH_REMATCH[0]}"}
            done
        }

        # File names for an option's PATH value, the `--opt=` prefix put back; one name per line,
        # so names with spaces stay whole.
        _chatgpt_credential_files()
        {
            local IFS=$'\\n'
            COMPREPLY=($(compgen -f -- "$1"))
            [[ -n $2 ]] && COMPREPLY=("${COMPREPLY[@]/#/$2}")
            compopt -o filenames 2>/dev/null
        }

        _chatgpt_credential()
        {
            local cur=${COMP_WORDS[COMP_CWORD]} prev= prefix=
            local verbs=\(D.singleQuoted(D.verbNames))
            local globals=\(D.singleQuoted(globals.joined(separator: " ")))
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

        """
        if let c = commandVerb {
            s += "            [[ $verb == \(c.name) && $w == -- ]] && { dashdash=$i; break; }\n"
        }
        s += """
                    continue
                fi
                case $w in
                    \(D.globalsWithValue.joined(separator: "|")))
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
            local values= offer= IFS=$' \\t\\n'
            case $prev in

        """
        s += arms.joined(separator: "\n") + "\n"
        s += """
            esac
            if [[ -n $offer ]]; then
                COMPREPLY=($(compgen -W "$values" -- "$cur"))
                [[ -n $prefix ]] && COMPREPLY=("${COMPREPLY[@]/#/$prefix}")
                return 0
            fi

            # The verb's sub-verbs, offered as its first word until one is given.
            local subs= sub=
            case $verb in

        """
        s += subVerbArms.joined(separator: "\n") + "\n"
        s += """
            esac
            for (( i = verbat + 1; i < COMP_CWORD; i++ )); do
                [[ -n $subs && " $subs " == *" ${COMP_WORDS[i]} "* ]] && { sub=${COMP_WORDS[i]}; break; }
            done

            # Options of the verb, plus the global options.
            local opts=$globals
            case $verb in

        """
        s += verbArms.joined(separator: "\n") + "\n"
        s += """
            esac

            if [[ $cur == -* ]]; then
                COMPREPLY=($(compgen -W "$opts" -- "$cur"))
            elif [[ -z $verb ]]; then
                case $wire in
                    git) COMPREPLY=($(compgen -W \(D.singleQuoted(D.gitVerbs)) -- "$cur")) ;;
                    docker) COMPREPLY=($(compgen -W \(D.singleQuoted(D.dockerVerbs)) -- "$cur")) ;;
                    *) COMPREPLY=($(compgen -W "$verbs" -- "$cur")) ;;
                esac
            elif [[ -n $subs && -z $sub ]]; then
                COMPREPLY=($(compgen -W "$subs" -- "$cur"))

        """
        if !D.verbNameVerbs.isEmpty {
            let which = D.verbNameVerbs.map { "$verb == \($0.name)" }.joined(separator: " || ")
            s += "    elif [[ ( \(which) ) && $prev == \"$verb\" ]]; then\n"
            s += "        COMPREPLY=($(compgen -W \"$verbs\" -- \"$cur\"))\n"
        }
        s += """
            fi
            return 0
        } &&
            complete -F _chatgpt_credential \(D.program)

        # ex: filetype=sh

        """
        return s
    }
}

// MARK: zsh

enum ZshCompletion {
    static func text() throws -> String {
        typealias D = CompletionData
        let commandVerb = try D.commandVerb()
        var s = "#compdef \(D.program)\n"
        s += D.header("zsh", installedAs: "share/zsh/site-functions/_\(D.program)")
        s += "\n" + D.profilesComment
        s += """
        (( $+functions[_chatgpt-credential_profiles] )) ||
        _chatgpt-credential_profiles() {
          local json
          local -a profiles
          json=$(_call_program profiles \(D.program) status --all --json --non-interactive </dev/null 2>/dev/null)
          while [[ $json =~ '"profile":"([A-Za-z0-9][A-Za-z0-9._-]{0,63})"' ]]; do
            profiles+=("$match[1]")
            json=${json#*"$MATCH"}
          done
          _wanted profiles expl 'profile' compadd -a profiles
        }

        _chatgpt-credential() {
          local curcontext=$curcontext state state_descr line ret=1
          typeset -A opt_args
          local -a globals verbs
          globals=(

        """
        for o in D.globals { s += "    " + spec(o, among: D.globals) + "\n" }
        s += "  )\n  verbs=(\n"
        for v in D.verbs { s += "    " + D.singleQuoted(v.name + ":" + v.summary) + "\n" }
        s += """
          )

          _arguments -C -s $globals ': :->verb' '*:: :->args' && ret=0

          case $state in
            (verb)
              case $opt_args[--protocol] in
                (git) _values 'git helper verb' \(D.gitVerbs) && ret=0 ;;
                (docker) _values 'docker helper verb' \(D.dockerVerbs) && ret=0 ;;
                (*) _describe -t verbs 'verb' verbs && ret=0 ;;
              esac
              ;;
            (args)
              curcontext=${curcontext%:*:*}:\(D.program)-$words[1]:
              case $words[1] in

        """
        for v in D.verbs {
            s += "        (\(v.name))\n"
            switch v.operands {
            case .command where v.name == commandVerb?.name:
                s += """
                          local -i dd=${words[(i)--]}
                          if (( dd < CURRENT )); then
                            # After "--": the command and its arguments.
                            words=("${(@)words[dd+1,-1]}")
                            (( CURRENT -= dd ))
                            _normal && ret=0
                          else
                            _arguments -s $globals \(arguments(v))'--[end of options: the command follows]' && ret=0
                          fi ;;

                """
            case .verbName:
                s += """
                          _arguments \(arguments(v))': :->verbname' && ret=0
                          [[ $state == verbname ]] && _describe -t verbs 'verb' verbs && ret=0 ;;

                """
            case .subcommands(let subs):
                s += "          _arguments -s $globals \\\n"
                for o in v.options { s += "            " + spec(o, among: v.options) + " \\\n" }
                s += "            ':subcommand:(\(subs.joined(separator: " ")))' '::path:_files' && ret=0 ;;\n"
            default:
                s += "          _arguments -s $globals \\\n"
                for o in v.options { s += "            " + spec(o, among: v.options) + " \\\n" }
                s += "            && ret=0 ;;\n"
            }
        }
        s += """
              esac
              ;;
          esac
          return ret
        }

        _chatgpt-credential "$@"

        """
        return s
    }

    /// The verb's own option specs on one line, each followed by a space (exec and help have none).
    static func arguments(_ v: VerbSpec) -> String {
        v.options.map { spec($0, among: v.options) + " " }.joined()
    }

    /// One `_arguments` spec: `'(--browser --no-browser)--device[device code flow…]'`,
    /// `'--min-ttl=[…]:seconds'`, `'*--allow-uid=[…]:uid'`, `'(-v --verbose)'{-v,--verbose}'[…]'`.
    static func spec(_ o: OptionSpec, among options: [OptionSpec]) -> String {
        let description = "[" + o.help.replacing("\\", with: "\\\\")
            .replacing("[", with: "\\[").replacing("]", with: "\\]") + "]"
        var value = ""
        if let placeholder = o.value {
            let message = placeholder.lowercased().replacing(":", with: "\\:")
            let action: String
            if !o.choices.isEmpty { action = ":(" + o.choices.joined(separator: " ") + ")" }
            else if o.completion == .profiles { action = ":_chatgpt-credential_profiles" }
            else if o.completion == .files { action = ":_files" }
            else { action = "" }
            value = (o.valueOptional ? "::" : ":") + message + action
        }
        let repeated = o.repeatable ? "*" : ""
        if let short = o.short {
            // Either spelling excludes the other; the brace expansion makes one spec of each.
            let names = ["-\(short)", o.long]
            return CompletionData.singleQuoted("(" + names.joined(separator: " ") + ")" + repeated) + "{" + names.joined(separator: ",") + "}"
                + CompletionData.singleQuoted(description + value)
        }
        let excluded = o.exclusiveGroup.map { g in options.filter { $0.exclusiveGroup == g && $0.long != o.long }.map(\.long) } ?? []
        let exclusion = excluded.isEmpty ? "" : "(" + excluded.joined(separator: " ") + ")"
        return CompletionData.singleQuoted(exclusion + repeated + o.long + (o.value == nil ? "" : "=") + description + value)
    }
}

// MARK: fish

enum FishCompletion {
    static func text() throws -> String {
        typealias D = CompletionData
        let commandVerb = try D.commandVerb()
        var s = """
        # fish completion for \(D.program)(1). Installed as
        # share/fish/vendor_completions.d/\(D.program).fish.
        # Written by `make docs` from the verbs' specs (Sources/CLI/…Command.swift) and the global
        # options (Sources/CLI/CommandLineSpec.swift): change those, then run `make docs`.


        """
        s += D.profilesComment
        s += """
        function __chatgpt_credential_profiles
            type -q \(D.program); or return 0
            command \(D.program) status --all --json --non-interactive </dev/null 2>/dev/null \\
                | string match -ar '"profile":"([A-Za-z0-9][A-Za-z0-9._-]{0,63})"' \\
                | string match -rv '^"profile":'
        end

        # The verb on the command line so far (skipping global options and their values), or nothing.
        function __chatgpt_credential_verb
            set -l words (commandline -opc)
            set -e words[1]
            while set -q words[1]
                switch $words[1]
                    case \(D.globalsWithValue.joined(separator: " "))
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


        """
        if let c = commandVerb {
            s += """
            # After `\(c.name) … --`: true, and the command line from the command on.
            function __chatgpt_credential_exec_command
                __chatgpt_credential_verb_is \(c.name); or return 1
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


            """
        } else {
            s += "function __chatgpt_credential_in_exec_command\n    return 1\nend\n\n"
        }
        s += """
        set -l c \(D.program)
        complete -c $c -f

        # Verbs.

        """
        for v in D.verbs { s += "complete -c $c -n '__chatgpt_credential_no_verb_speaking plain' -a \(v.name) -d \(quoted(v.summary))\n" }
        s += "complete -c $c -n '__chatgpt_credential_no_verb_speaking git' -a \(quoted(D.gitVerbs))\n"
        s += "complete -c $c -n '__chatgpt_credential_no_verb_speaking docker' -a \(quoted(D.dockerVerbs))\n"
        for v in D.verbNameVerbs { s += "complete -c $c -n '__chatgpt_credential_verb_is \(v.name)' -a \(quoted(D.verbNames))\n" }
        for v in D.verbs {
            if case .subcommands(let subs) = v.operands {
                s += "complete -c $c -n '__chatgpt_credential_sub_verb_due \(v.name) \(subs.joined(separator: " "))' -a \(quoted(subs.joined(separator: " ")))\n"
            }
        }
        s += """

        # Global options, before or after the verb (not after the command verb's --).
        set -l g 'not __chatgpt_credential_in_exec_command'

        """
        for o in D.globals { s += "complete -c $c -n $g " + option(o) + "\n" }
        for v in D.verbs where !v.options.isEmpty {
            s += "\n# \(v.name)\n"
            for o in v.options { s += "complete -c $c -n '__chatgpt_credential_verb_is \(v.name)' " + option(o) + "\n" }
        }
        if let c = commandVerb {
            s += """

            # \(c.synopsis)
            complete -c $c -n '__chatgpt_credential_verb_is \(c.name); and not __chatgpt_credential_in_exec_command' -a -- -d 'the command follows'
            complete -c $c -n __chatgpt_credential_in_exec_command -x -a '(__chatgpt_credential_complete_exec_command)'

            """
        }
        return s
    }

    /// `-s v -l verbose -d '…'`, `-l store -x -a 'auto secret-service file' -d '…'`.
    static func option(_ o: OptionSpec) -> String {
        var s = o.short.map { "-s \($0) " } ?? ""
        s += "-l " + o.long.dropFirst(2)
        if o.value != nil {
            if !o.choices.isEmpty { s += " -x -a " + quoted(o.choices.joined(separator: " ")) }
            else if o.completion == .profiles { s += " -x -a '(__chatgpt_credential_profiles)'" }
            else if o.completion == .files { s += " -r -F" }
            else { s += " -x" }
        }
        return s + " -d " + quoted(o.help)
    }

    /// `text` in fish's single quotes (only `\` and `'` are special there).
    static func quoted(_ text: String) -> String {
        "'" + text.replacing("\\", with: "\\\\").replacing("'", with: "\\'") + "'"
    }
}
