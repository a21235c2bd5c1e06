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

    /// A port for sshd on 127.0.0.1 that is free now: below the kernel's ephemeral range (where
    /// every loopback connection of the parallel suite takes its local port, and a bind then
    /// fails after sshd has already daemonised), and bindable at the moment it is chosen.
    static func unusedPort() -> Int {
        let range = (try? String(contentsOfFile: "/proc/sys/net/ipv4/ip_local_port_range", encoding: .utf8)) ?? ""
        let ephemeralStart = range.split(whereSeparator: \.isWhitespace).first.flatMap { Int($0) } ?? 32768
        let candidates = max(1024, ephemeralStart - 12000)..<max(2048, ephemeralStart)
        for _ in 0..<50 {
            let port = Int.random(in: candidates)
            let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            let bound = Loopback.bind(fd, port: port) == 0
            close(fd)
            if bound { return port }
        }
        return Int.random(in: candidates)
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
