import Testing
@testable import CLI

@Suite struct LoginModeTests {
    @Test func explicitFlagIsNotNeededForTheDefault() throws {
        #expect(Runner.defaultLoginMode(try Settings(environment: [:])) == .device)
        #expect(Runner.defaultLoginMode(try Settings(environment: ["DISPLAY": ":0"])) == .browser)
        #expect(Runner.defaultLoginMode(try Settings(environment: ["WAYLAND_DISPLAY": "wayland-0"])) == .browser)
        #expect(Runner.defaultLoginMode(try Settings(environment: ["DISPLAY": ":0", "SSH_CONNECTION": "1 2 3 4"])) == .device)
        #expect(Runner.defaultLoginMode(try Settings(environment: ["WAYLAND_DISPLAY": "w", "SSH_TTY": "/dev/pts/1"])) == .device)
        #expect(Runner.defaultLoginMode(try Settings(environment: ["DISPLAY": ""])) == .device)
    }
}
