import CredentialCore
import SystemRuntime
import Secrets
#if canImport(Glibc)
import Glibc
#endif

/// The encrypted-file store's passphrase prompt (`PassphrasePrompt`): the executable's, so that
/// `Stores` never opens a terminal itself. Given to the store unless `--non-interactive`.
struct TerminalPassphrasePrompt: PassphrasePrompt {
    /// Prompts on /dev/tty with echo off; the answer is read byte by byte straight into `SecretBytes`.
    func passphrase(_ prompt: String) throws -> SecretBytes {
        let fd = open("/dev/tty", O_RDWR | O_NOCTTY | O_CLOEXEC)
        guard fd >= 0 else {
            throw CredentialError.storeUnavailable(
                "no terminal to ask for the passphrase; set CHATGPT_CREDENTIAL_PASSPHRASE_FILE to a file (mode 600) holding it (in a systemd unit: LoadCredential=chatgpt-credential.passphrase:FILE)")
        }
        defer { close(fd) }
        var saved = termios()
        let haveTermios = tcgetattr(fd, &saved) == 0
        if haveTermios {
            var quiet = saved
            quiet.c_lflag &= ~tcflag_t(ECHO)
            quiet.c_lflag |= tcflag_t(ICANON)
            _ = tcsetattr(fd, TCSAFLUSH, &quiet)
        }
        defer {
            if haveTermios { _ = tcsetattr(fd, TCSAFLUSH, &saved) }
            _ = "\n".withCString { Glibc.write(fd, $0, 1) }
        }
        _ = prompt.withCString { Glibc.write(fd, $0, strlen($0)) }
        var line = SecretBytes(capacity: 4096)
        var ended = false
        while !ended && line.count < 4096 {
            line.append(upTo: 1) { room in
                let n = Glibc.read(fd, room.baseAddress, 1)
                if n < 0 && errno == EINTR { return 0 }
                if n <= 0 || room[0] == 10 { ended = true; return 0 }
                return 1
            }
        }
        if line.count > 0, line.withUnsafeBytes({ $0[$0.count - 1] }) == 13 { line.truncate(to: line.count - 1) }
        return line
    }
}
