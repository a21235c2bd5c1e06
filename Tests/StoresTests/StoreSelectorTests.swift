import Testing
@_spi(CredentialOwner) import Stores
import CredentialCore
import TestSupport

/// Where `login` and `store` put a new credential when the Secret Service's default collection
/// lives only in memory (man page, STORES: durability).
@Suite struct StoreSelectorDurabilityTests {
    static let session = "/org/freedesktop/secrets/collection/session"

    func selector(_ choice: StoreChoice, _ probe: SecretServiceAvailability) -> (StoreSelector, MemoryStore, MemoryStore) {
        let ss = MemoryStore(kind: .secretService), file = MemoryStore(kind: .file)
        return (StoreSelector(choice: choice, secretService: { ss }, file: { file }, fileHolds: { _ in false }, probe: { probe }), ss, file)
    }

    @Test func autoWithAnInMemoryDefaultStoresInTheFileSayingWhy() throws {
        let (s, _, file) = selector(.auto, .volatile(collection: Self.session))
        var notices: [String] = []
        let chosen = try s.destination(for: .default) { notices.append($0) }
        #expect(chosen === file)
        #expect(notices.count == 1 && notices[0].contains("keeps secrets only in memory") && notices[0].contains(Self.session), "\(notices)")
    }

    /// An explicit store is not probed (no second deadline before a hung keyring's error); the
    /// warning comes from where the write landed (SecretServiceCLITests::volatileDefaultCollection).
    @Test func anExplicitSecretServiceIsObeyedWithoutAProbe() throws {
        let ss = MemoryStore(kind: .secretService), file = MemoryStore(kind: .file)
        var probes = 0
        let s = StoreSelector(choice: .secretService, secretService: { ss }, file: { file }, fileHolds: { _ in false },
                              probe: { probes += 1; return .volatile(collection: Self.session) })
        var notices: [String] = []
        #expect(try s.destination(for: .default) { notices.append($0) } === ss)
        #expect(notices.isEmpty && probes == 0, "\(notices)")
        #expect(StoreSelector.volatileWriteNotice(after: ss) == nil) // not a Secret Service write
    }

    @Test func aDurableDefaultIsUsedWithoutANotice() throws {
        for choice in [StoreChoice.auto, .secretService] {
            let (s, ss, _) = selector(choice, .available)
            var notices: [String] = []
            #expect(try s.destination(for: .default) { notices.append($0) } === ss)
            #expect(notices.isEmpty, "\(choice): \(notices)")
        }
    }

    @Test func onlyGnomeKeyringsSessionCollectionIsVolatile() {
        #expect(!SecretServiceStore.isDurable(collection: Self.session))
        #expect(SecretServiceStore.isDurable(collection: "/org/freedesktop/secrets/collection/login"))
        #expect(SecretServiceStore.isDurable(collection: "/org/freedesktop/secrets/collection/session2"))
    }
}
