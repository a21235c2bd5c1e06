import Testing
@testable import CLI

@Suite struct LoginModeTests {
    @Test func explicitFlagIsNotNeededForTheDefault() {
        #expect(Runner.defaultLoginMode([:]) == .device)
        #expect(Runner.defaultLoginMode(["DISPLAY": ":0"]) == .browser)
        #expect(Runner.defaultLoginMode(["WAYLAND_DISPLAY": "wayland-0"]) == .browser)
        #expect(Runner.defaultLoginMode(["DISPLAY": ":0", "SSH_CONNECTION": "1 2 3 4"]) == .device)
        #expect(Runner.defaultLoginMode(["WAYLAND_DISPLAY": "w", "SSH_TTY": "/dev/pts/1"]) == .device)
        #expect(Runner.defaultLoginMode(["DISPLAY": ""]) == .device)
    }
}
