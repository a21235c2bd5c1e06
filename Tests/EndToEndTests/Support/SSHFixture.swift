import Foundation
import Testing

/// A throwaway sshd on loopback, as the SSH recipes and tests need it: keys in a directory of
/// the test's, public-key logins only, a UNIX socket forwardable with `ssh -R`.
enum SSHFixture {
    /// `DIR/hostkey`, `DIR/userkey` (ed25519, no passphrase) and `DIR/authorized_keys` holding
    /// the user key.
    static func makeKeys(in dir: String, env: [String: String]) throws {
        for key in ["hostkey", "userkey"] {
            let r = Harness.run("/usr/bin/ssh-keygen", ["-q", "-t", "ed25519", "-N", "", "-f", dir + "/" + key], env: env)
            #expect(r.status == 0, "ssh-keygen: \(r.stderr)")
        }
        try FileManager.default.copyItem(atPath: dir + "/userkey.pub", toPath: dir + "/authorized_keys")
    }

    /// The sshd_config for keys made by `makeKeys(in: dir)`, listening on 127.0.0.1:`port`;
    /// `path`, when given, is the PATH sshd sets for the session.
    static func sshdConfig(port: Int, keysIn dir: String, path: String? = nil) -> String {
        """
        ListenAddress 127.0.0.1
        Port \(port)
        HostKey \(dir)/hostkey
        AuthorizedKeysFile \(dir)/authorized_keys
        PermitRootLogin prohibit-password
        PasswordAuthentication no
        KbdInteractiveAuthentication no
        UsePAM no
        StrictModes no
        AllowStreamLocalForwarding yes
        StreamLocalBindUnlink yes
        \(path.map { "SetEnv PATH=" + $0 + "\n" } ?? "")PidFile none
        LogLevel ERROR

        """
    }
}
