import CredentialCore
import SystemRuntime
import Age
import Secrets

internal import CLibSecret
#if canImport(Glibc)
import Glibc
#endif

/// The freedesktop Secret Service (gnome-keyring, KeePassXC, …) through libsecret (man page STORES).
///
/// One item per profile in the default collection, attributes exactly `service=chatgpt-credential`
/// and `profile=NAME` (stable and non-secret, like git-credential-libsecret: anything that changes
/// lives inside the secret, so a write replaces the item instead of adding one), label
/// `ChatGPT credential (NAME)`, secret = the JSON document.
///
/// Three outcomes are kept apart: nothing stored (`read` returns nil), a locked keyring
/// (`keyringLocked`; searches never pass SECRET_SEARCH_UNLOCK; `read` takes SearchItems' own
/// split into unlocked and locked matches and the other operations ask every found item
/// `secret_item_get_locked()`, so a locked item is never mistaken for a missing one and nothing is
/// deleted or replaced while locked), no usable service (`storeUnavailable`: no session bus, nobody
/// owning org.freedesktop.secrets), and a service that did not answer before the deadline
/// (`storeNotAnswering`).
///
/// The bus is the one `SessionBus.find` found (the variable, `$XDG_RUNTIME_DIR/bus`,
/// `/run/user/UID/bus`), reached through the process's one `SecretServiceConnection`, never the
/// session bus libsecret would pick itself (ARCHITECTURE.md, "The session bus").
///
/// Only the non-variadic libsecret API is used (Swift cannot call C variadics). Every call takes a
/// GCancellable that a watchdog thread (`Deadline.watch`) cancels when the deadline passes; the
/// calls themselves run on the calling thread, so no thread hand-off sits on the hot path.
///
/// libsecret is not linked: it is dlopen()ed on the first operation (`ccred_libsecret_load`), so
/// processes that never touch the Secret Service (a file-store `get`) never load glib. Every
/// libsecret/glib call therefore goes through its `ccred_` pointer (CLibSecret/shim.h).
public final class SecretServiceStore: CredentialStore {
    public static let serviceName = "chatgpt-credential"

    public let kind: StoreKind = .secretService
    /// Deadline for each operation, in seconds.
    public let timeout: Double
    /// Where the session bus is (read once by the executable).
    public let bus: SessionBus

    /// When the work this store is made for began (monotonic ms): a call to the service that
    /// ran out of time after it, less than a deadline ago, answers this store's calls at once
    /// (`SecretServiceConnection.wentSilent`).
    let begun: Int64

    /// `timeout`: `CHATGPT_CREDENTIAL_DBUS_TIMEOUT` when set, else (nil)
    /// `Deadline.secretServiceSeconds()` (3 s, 30 s with a terminal). `begun`: when the work it
    /// is made for began (a broker request, before it waited for the profile's lock).
    public init(bus: SessionBus, timeout: Double? = nil, begun: Int64 = Clock.monotonicMillis()) {
        self.bus = bus
        self.timeout = timeout ?? Deadline.secretServiceSeconds()
        self.begun = begun
    }

    public func location(for profile: Profile) -> String { "the Secret Service" }

    public static func label(for profile: Profile) -> String { "ChatGPT credential (\(profile.name))" }

    /// Says how to unlock; whether `--store file` would help is for the caller to say (only it
    /// knows whether the file store holds the profile: man page, STORES).
    public static let lockedMessage =
        "the Secret Service keyring is locked (see: chatgpt-credential doctor); unlock it by logging in to the desktop session, or with: printf '%s' \"$PASSWORD\" | gnome-keyring-daemon --replace --unlock"

    // MARK: CredentialStore

    /// The hot path: one SearchItems (its answer keeps unlocked and locked matches apart), then
    /// one OpenSession + GetSecrets for the first unlocked match. The D-Bus-path API is used
    /// instead of `secret_service_search_sync`, which would also build a proxy per item (a
    /// Properties.GetAll plus four bus-daemon calls: AddMatch ×2, StartServiceByName,
    /// GetNameOwner) only to learn what SearchItems already said. Nothing is unlocked.
    public func read(_ profile: Profile) throws -> SecretBytes? {
        try perform { service, cancellable in
            let attributes = Self.attributes(profile)
            defer { ccred_g_hash_table_unref(attributes) }
            return try Self.firstUnlockedSecret(service, attributes, cancellable)
        }
    }

    /// The D-Bus object path of the collection the last successful `write` put the item in (the
    /// item's own collection when it was replaced, else the default one), so that the caller can
    /// say when that collection does not survive a restart of the keyring daemon.
    public private(set) var lastWrittenCollection: String?

    /// A read-only lookup of an item another program keeps (Codex's `Codex Auth` item for
    /// `store --from-codex`): the secret of the first unlocked item whose attributes include all
    /// of `attributes`. nil when no item matches; `keyringLocked` when only locked items match;
    /// `storeUnavailable`/`storeNotAnswering` as for `read`. Nothing is unlocked, written or deleted.
    public func lookup(attributes: [(String, String)]) throws -> SecretBytes? {
        try perform { service, cancellable in
            let table = ccred_attributes_new()!
            for (key, value) in attributes { _ = ccred_g_hash_table_insert(table, ccred_g_strdup(key), ccred_g_strdup(value)) }
            defer { ccred_g_hash_table_unref(table) }
            return try Self.firstUnlockedSecret(service, table, cancellable)
        }
    }

    /// One SearchItems, then GetSecrets for the first unlocked match (see `read`).
    private static func firstUnlockedSecret(_ service: UnsafeMutablePointer<SecretService>, _ attributes: OpaquePointer,
                                            _ cancellable: UnsafeMutablePointer<GCancellable>) throws -> SecretBytes? {
        var unlocked: UnsafeMutablePointer<UnsafeMutablePointer<gchar>?>?
        var locked: UnsafeMutablePointer<UnsafeMutablePointer<gchar>?>?
        defer { ccred_g_strfreev(unlocked); ccred_g_strfreev(locked) }
        var error: UnsafeMutablePointer<GError>?
        guard ccred_secret_service_search_for_dbus_paths_sync(service, nil, attributes, cancellable, &unlocked, &locked, &error) != 0 else {
            throw map(error, doing: "search for the credential")
        }
        for path in strings(unlocked) {
            guard let value = ccred_secret_service_get_secret_for_dbus_path_sync(service, path, cancellable, &error) else {
                if error != nil { throw map(error, doing: "read the credential") }
                continue // gone since the search: try the next match
            }
            defer { ccred_secret_value_unref(UnsafeMutableRawPointer(value)) }
            return bytes(of: value)
        }
        if locked?.pointee != nil { throw CredentialError.keyringLocked(lockedMessage) }
        return nil
    }

    @_spi(CredentialOwner) public func write(_ profile: Profile, secret: borrowing SecretBytes) throws {
        let label = Self.label(for: profile)
        lastWrittenCollection = nil
        lastWrittenCollection = try perform { service, cancellable -> String? in
            try Self.withItemsUnlessLocked(profile, service, cancellable) { attributes, found in
                let value: OpaquePointer = secret.withUnsafeBytes { raw in
                    guard let base = raw.baseAddress, raw.count > 0 else { return ccred_secret_value_new("", 0, "application/json")! }
                    return ccred_secret_value_new(base.assumingMemoryBound(to: CChar.self), gssize(raw.count), "application/json")!
                }
                defer { ccred_secret_value_unref(UnsafeMutableRawPointer(value)) }
                var error: UnsafeMutablePointer<GError>?
                if let item = found.first {
                    // Replace in place: the item keeps its identity and stays the only one.
                    guard ccred_secret_item_set_secret_sync(item, value, cancellable, &error) != 0 else {
                        throw Self.map(error, doing: "replace the stored credential")
                    }
                    if let current = ccred_secret_item_get_label(item) {
                        let same = String(cString: current) == label
                        ccred_g_free(current)
                        if !same, ccred_secret_item_set_label_sync(item, label, cancellable, &error) == 0 {
                            throw Self.map(error, doing: "label the stored credential")
                        }
                    }
                    for extra in found.dropFirst() where ccred_secret_item_delete_sync(extra, cancellable, &error) == 0 {
                        throw Self.map(error, doing: "remove a duplicate item")
                    }
                    return Self.objectPath(item).map { Self.collectionPath(ofItem: $0) }
                }
                // A new item: refuse up front when the default collection is locked (storing would try
                // an unlock prompt that a headless session cannot show).
                let collection = try Self.refuseLockedDefaultCollection(service, cancellable)
                // schema NULL: no xdg:schema attribute, the attributes are exactly ours.
                guard ccred_secret_service_store_sync(service, nil, attributes, SECRET_COLLECTION_DEFAULT, label, value, cancellable, &error) != 0 else {
                    throw Self.map(error, doing: "store the credential")
                }
                return collection
            }
        }
    }

    @discardableResult
    @_spi(CredentialOwner) public func delete(_ profile: Profile) throws -> Bool {
        try perform { service, cancellable in
            try Self.withItemsUnlessLocked(profile, service, cancellable) { _, found in
                var error: UnsafeMutablePointer<GError>?
                for item in found where ccred_secret_item_delete_sync(item, cancellable, &error) == 0 {
                    // Removed by someone else since the search (a concurrent erase): gone is gone.
                    if Self.isNoSuchObject(error) { ccred_g_error_free(error); error = nil; continue }
                    throw Self.map(error, doing: "delete the stored credential")
                }
                return !found.isEmpty
            }
        }
    }

    /// Profiles with an item here. A locked item's attributes are unreadable (gnome-keyring shows
    /// only hashes), so a locked match throws `keyringLocked` rather than listing too little.
    public func profiles() throws -> [String] {
        try perform { service, cancellable in
            let attributes = ccred_attributes_new()!
            _ = ccred_g_hash_table_insert(attributes, ccred_g_strdup("service"), ccred_g_strdup(Self.serviceName))
            defer { ccred_g_hash_table_unref(attributes) }
            let items = try Self.search(service, attributes, loadSecrets: false, cancellable)
            defer { Self.free(items) }
            var names: Set<String> = []
            for item in Self.elements(items) {
                if ccred_secret_item_get_locked(item) != 0 { throw CredentialError.keyringLocked(Self.lockedMessage) }
                guard let table = ccred_secret_item_get_attributes(item) else { continue }
                defer { ccred_g_hash_table_unref(table) }
                if let raw = ccred_g_hash_table_lookup(table, "profile") {
                    let name = String(cString: raw.assumingMemoryBound(to: CChar.self))
                    if Profile.isValid(name) { names.insert(name) }
                }
            }
            return names.sorted()
        }
    }

    /// The Secret Service must answer, and the profile's items (or, for a new item, the default
    /// collection) must be unlocked, before a refresh token is spent for a write here.
    @_spi(CredentialOwner) public func prepareWrite(_ profile: Profile, size: Int) throws -> PreparedWrite {
        try perform { service, cancellable in
            try Self.withItemsUnlessLocked(profile, service, cancellable) { _, found in
                guard found.isEmpty else { return }
                try Self.refuseLockedDefaultCollection(service, cancellable)
            }
        }
        return DirectWrite(store: self, profile: profile)
    }

    /// SHA-256 of the stored secret (one SearchItems and one GetSecrets).
    public func version(_ profile: Profile) throws -> [UInt8]? {
        var version: [UInt8]?
        _ = try read(profile, version: &version)
        return version
    }

    public func read(_ profile: Profile, version: inout [UInt8]?) throws -> SecretBytes? {
        version = nil
        guard let secret = try read(profile) else { return nil }
        version = secret.withUnsafeBytes { Sodium.sha256($0) }
        return secret
    }

    private final class DirectWrite: PreparedWrite {
        let store: SecretServiceStore
        let profile: Profile
        init(store: SecretServiceStore, profile: Profile) { self.store = store; self.profile = profile }
        func commit(_ secret: borrowing SecretBytes) throws { try store.write(profile, secret: secret) }
    }

    // MARK: Probe

    /// For the `auto` selector: `.available` when the Secret Service answers within the deadline
    /// and its default collection is unlocked and durable, `.locked` when that collection is
    /// locked, `.volatile` when it lives only in memory, `.unreachable(reason)` when it could not
    /// be asked (no bus found, the bus or the service silent or absent, no libsecret, timeout),
    /// `.unavailable(reason)` otherwise (no default keyring, a failure).
    public static func probe(bus: SessionBus, timeout: Double? = nil) -> SecretServiceAvailability {
        let store = SecretServiceStore(bus: bus, timeout: timeout)
        do {
            return try store.perform { service, cancellable in
                var error: UnsafeMutablePointer<GError>?
                guard let collection = ccred_secret_collection_for_alias_sync(service, SECRET_COLLECTION_DEFAULT, SECRET_COLLECTION_NONE, cancellable, &error) else {
                    if error != nil { throw Self.map(error, doing: "find the default keyring") }
                    return .unavailable("the Secret Service has no default keyring; create one by logging in to the desktop session")
                }
                defer { ccred_g_object_unref(collection) }
                if ccred_secret_collection_get_locked(collection) != 0 { return .locked(Self.lockedMessage) }
                if let path = Self.objectPath(collection), !Self.isDurable(collection: path) { return .volatile(collection: path) }
                return .available
            }
        } catch CredentialError.keyringLocked(let message) {
            return .locked(message)
        } catch CredentialError.storeUnavailable(let message, _), CredentialError.storeNotAnswering(let message) {
            return .unreachable(message)
        } catch let error as CredentialError {
            return .unavailable(error.message)
        } catch {
            return .unavailable("\(error)")
        }
    }

    // MARK: Durability

    /// `StoreCollection.isDurable`.
    public static func isDurable(collection path: String) -> Bool { StoreCollection.isDurable(path) }

    /// The D-Bus object path of the collection holding the profile's item (the first unlocked
    /// match, else the first locked one), or nil when there is none. One SearchItems; for `status`.
    public func collection(of profile: Profile) throws -> String? {
        try perform { service, cancellable in
            let attributes = Self.attributes(profile)
            defer { ccred_g_hash_table_unref(attributes) }
            var unlocked: UnsafeMutablePointer<UnsafeMutablePointer<gchar>?>?
            var locked: UnsafeMutablePointer<UnsafeMutablePointer<gchar>?>?
            defer { ccred_g_strfreev(unlocked); ccred_g_strfreev(locked) }
            var error: UnsafeMutablePointer<GError>?
            guard ccred_secret_service_search_for_dbus_paths_sync(service, nil, attributes, cancellable, &unlocked, &locked, &error) != 0 else {
                throw Self.map(error, doing: "search for the credential")
            }
            guard let item = (Self.strings(unlocked) + Self.strings(locked)).first else { return nil }
            return Self.collectionPath(ofItem: String(cString: item))
        }
    }

    /// The D-Bus object path of a libsecret proxy (a SecretCollection or SecretItem is a GDBusProxy).
    private static func objectPath<T>(_ proxy: UnsafeMutablePointer<T>) -> String? {
        let raw = ccred_g_dbus_proxy_get_object_path(UnsafeMutableRawPointer(proxy).assumingMemoryBound(to: GDBusProxy.self))
        return raw.map { String(cString: $0) }
    }

    /// An item's path is its collection's path and one more element
    /// (`/org/freedesktop/secrets/collection/login/3`).
    static func collectionPath(ofItem item: String) -> String {
        guard let slash = item.lastIndex(of: "/"), slash != item.startIndex else { return item }
        return String(item[..<slash])
    }

    // MARK: Plumbing

    /// Runs `body` with the process's SecretService (`SecretServiceConnection`) under the
    /// deadline: on this thread, with a watchdog that cancels `cancellable` when the deadline
    /// passes (every libsecret call takes it, so a hung service returns G_IO_ERROR_CANCELLED at
    /// once → the timeout error). When the keyring daemon or the bus behind that service has gone
    /// since it was opened (`ConnectionLost`: the daemon replaced or restarted, the bus closed),
    /// the service is dropped and `body` runs once more on a fresh one, within the same deadline,
    /// so a long-lived `serve` reaches the new daemon (man page STORES). Every operation here is
    /// a whole "make it so" (search, then read, replace or delete), so running it again is safe.
    private func perform<T: ~Copyable>(_ body: (UnsafeMutablePointer<SecretService>, UnsafeMutablePointer<GCancellable>) throws -> T) throws -> T {
        guard let found = bus.find() else {
            throw CredentialError.storeUnavailable("the Secret Service cannot be reached: " + bus.notFoundReason, secretService: true)
        }
        try Self.loadLibsecret()
        let seconds = timeout
        let connection = SecretServiceConnection.shared
        if connection.wentSilent(found.address, after: begun, now: Clock.monotonicMillis(), within: Int64(seconds * 1000)) {
            throw Self.timeoutError(seconds)
        }
        let cancellable = ccred_g_cancellable_new()!
        defer { ccred_g_object_unref(cancellable) }
        _ = ccred_g_object_ref(cancellable) // the work's reference, dropped when it finishes
        let watched = CancellableReference(cancellable) // the watchdog's, dropped with its closure
        let outcome: Result<T, any Error> = Deadline.watch(seconds: seconds, onTimeout: {
            ccred_g_cancellable_cancel(watched.pointer)
        }) {
            defer { ccred_g_object_unref(cancellable) }
            func attempt(last: Bool) -> Result<T, any Error>? {
                let service: UnsafeMutablePointer<SecretService>
                do {
                    service = try connection.service(at: found.address, cancellable)
                } catch let error as CredentialError {
                    return .failure(error)
                } catch let cancelled as Cancelled {
                    return .failure(cancelled)
                } catch {
                    return .failure(CredentialError.storeFailure("the Secret Service failed: \(error)"))
                }
                defer { ccred_g_object_unref(service) }
                do {
                    return .success(try body(service, cancellable))
                } catch let lost as ConnectionLost {
                    connection.forget(service)
                    return last ? .failure(lost.unreachable(on: found.address)) : nil
                } catch let error as CredentialError {
                    return .failure(error)
                } catch let cancelled as Cancelled {
                    return .failure(cancelled)
                } catch {
                    return .failure(CredentialError.storeFailure("the Secret Service failed: \(error)"))
                }
            }
            if let first = attempt(last: false) { return first }
            return attempt(last: true)!
        }
        switch consume outcome {
        case .success(let value): return value
        case .failure(let error):
            var silent = error is Cancelled
            if case .storeNotAnswering? = error as? CredentialError { silent = true }
            if silent { connection.recordSilence(found.address, at: Clock.monotonicMillis()) }
            if error is Cancelled { throw Self.timeoutError(seconds) }
            throw error
        }
    }

    /// dlopen()s libsecret (once per process); a missing library is an unavailable store.
    static func loadLibsecret() throws {
        guard ccred_libsecret_load() == 0 else {
            let why = ccred_libsecret_error().map { String(cString: $0) } ?? "unknown reason"
            throw CredentialError.storeUnavailable("libsecret is not installed (\(why)); install libsecret-1-0", secretService: true)
        }
    }

    /// One reference to a GCancellable, released when the last owner (e.g. a watchdog's
    /// closure, which may outlive `perform`) goes away.
    private final class CancellableReference {
        let pointer: UnsafeMutablePointer<GCancellable>
        init(_ pointer: UnsafeMutablePointer<GCancellable>) {
            self.pointer = pointer
            _ = ccred_g_object_ref(pointer)
        }
        deinit { ccred_g_object_unref(pointer) }
    }

    /// A call returned G_IO_ERROR_CANCELLED: the watchdog cancelled it because the deadline
    /// passed (`perform`), which reports the timeout (`timeoutError`, exit 5). Never shown.
    struct Cancelled: Error {}

    private static func timeoutError(_ seconds: Double) -> CredentialError {
        .storeNotAnswering("the Secret Service did not answer within \(Deadline.describe(seconds)); check that the keyring daemon (gnome-keyring, KeePassXC) is running and responsive")
    }

    /// Consumes `error` (frees it) and classifies it: a `CredentialError`, or `ConnectionLost`
    /// when the daemon or bus the service was opened on has gone (`perform` then opens afresh).
    private static func map(_ error: UnsafeMutablePointer<GError>?, doing what: String) -> any Error {
        guard let error else { return CredentialError.storeFailure("the Secret Service could not \(what) (no reason given)") }
        defer { ccred_g_error_free(error) }
        let domain = error.pointee.domain, code = error.pointee.code
        let text = error.pointee.message.map { String(cString: $0) } ?? "unknown error"
        if domain == ccred_io_error_quark() && code == Int32(G_IO_ERROR_CANCELLED.rawValue) {
            return Cancelled()
        }
        if domain == ccred_secret_error_quark() && code == Int32(SECRET_ERROR_IS_LOCKED.rawValue) {
            return CredentialError.keyringLocked(lockedMessage)
        }
        // A service that is there but lets a call run out of time did not answer: exit 5, never "not found".
        let silentDBus: [GDBusError] = [G_DBUS_ERROR_NO_REPLY, G_DBUS_ERROR_TIMEOUT, G_DBUS_ERROR_TIMED_OUT]
        if (domain == ccred_dbus_error_quark() && silentDBus.contains(where: { Int32($0.rawValue) == code })) ||
            (domain == ccred_io_error_quark() && code == Int32(G_IO_ERROR_TIMED_OUT.rawValue)) {
            return CredentialError.storeNotAnswering("the Secret Service did not answer (\(text)); check that the keyring daemon (gnome-keyring, KeePassXC) is running and responsive")
        }
        // The proxy keeps addressing the daemon it was opened on (its name-owner tracking would run
        // on GLib's default main context, which this process never iterates): a daemon replaced or
        // restarted since shows as "The name :1.N was not provided", a closed bus as CLOSED, and a
        // secret session the new daemon never opened as NoSession.
        let lostDBus: [GDBusError] = [G_DBUS_ERROR_SERVICE_UNKNOWN, G_DBUS_ERROR_NAME_HAS_NO_OWNER, G_DBUS_ERROR_DISCONNECTED,
                                      G_DBUS_ERROR_NO_SERVER]
        let lostIO: [GIOErrorEnum] = [G_IO_ERROR_CLOSED, G_IO_ERROR_BROKEN_PIPE, G_IO_ERROR_CONNECTION_CLOSED]
        if (domain == ccred_dbus_error_quark() && lostDBus.contains(where: { Int32($0.rawValue) == code })) ||
            (domain == ccred_io_error_quark() && lostIO.contains(where: { Int32($0.rawValue) == code })) ||
            (domain == ccred_io_error_quark() && code == Int32(G_IO_ERROR_DBUS_ERROR.rawValue) && remoteErrorName(error) == "org.freedesktop.Secret.Error.NoSession") {
            return ConnectionLost(detail: text)
        }
        let unavailableDBus: [GDBusError] = [G_DBUS_ERROR_SPAWN_EXEC_FAILED, G_DBUS_ERROR_SPAWN_FAILED,
                                             G_DBUS_ERROR_SPAWN_CHILD_EXITED, G_DBUS_ERROR_UNKNOWN_METHOD, G_DBUS_ERROR_UNKNOWN_OBJECT]
        let unavailableIO: [GIOErrorEnum] = [G_IO_ERROR_CONNECTION_REFUSED, G_IO_ERROR_NOT_FOUND, G_IO_ERROR_DBUS_ERROR]
        if (domain == ccred_dbus_error_quark() && unavailableDBus.contains(where: { Int32($0.rawValue) == code })) ||
            (domain == ccred_io_error_quark() && unavailableIO.contains(where: { Int32($0.rawValue) == code })) {
            return CredentialError.storeUnavailable("the Secret Service is not reachable (\(text)); start a keyring daemon (gnome-keyring, KeePassXC)", secretService: true)
        }
        return CredentialError.storeFailure("the Secret Service could not \(what): \(text)")
    }

    /// The D-Bus error name of an error reply GDBus could not map to a GError domain
    /// (G_IO_ERROR_DBUS_ERROR), e.g. org.freedesktop.Secret.Error.NoSession: the protocol's own
    /// identifier, asked of GLib (g_dbus_error_get_remote_error(3)), never read out of the message.
    private static func remoteErrorName(_ error: UnsafeMutablePointer<GError>) -> String? {
        guard let name = ccred_g_dbus_error_get_remote_error(error) else { return nil }
        defer { ccred_g_free(name) }
        return String(cString: name)
    }

    /// The daemon or the bus a SecretService was opened on has gone (`map`).
    struct ConnectionLost: Error {
        var detail: String

        /// What to say when a fresh service fails the same way: nothing serves the Secret Service there.
        func unreachable(on address: String) -> CredentialError {
            .storeUnavailable("the Secret Service cannot be reached: nothing provides it on the session bus \(address) (\(detail)); start a keyring daemon (gnome-keyring, KeePassXC)", secretService: true)
        }
    }

    /// Why `ccred_secret_service_open_at` failed (consumes `error`): the deadline, or a bus that
    /// did not answer (no socket, refused, closed during the handshake).
    static func connectFailure(_ error: UnsafeMutablePointer<GError>?, address: String) -> any Error {
        guard let error else { return CredentialError.storeUnavailable("the Secret Service cannot be reached: the session bus \(address) did not answer", secretService: true) }
        defer { ccred_g_error_free(error) }
        if error.pointee.domain == ccred_io_error_quark() && error.pointee.code == Int32(G_IO_ERROR_CANCELLED.rawValue) {
            return Cancelled()
        }
        let text = error.pointee.message.map { String(cString: $0) } ?? "unknown error"
        return CredentialError.storeUnavailable("the Secret Service cannot be reached: the session bus \(address) did not answer (\(text))", secretService: true)
    }

    /// Throws `keyringLocked` when the default collection is locked (a new item would need an
    /// unlock prompt that a headless session cannot show); else returns its object path, when
    /// there is one.
    @discardableResult
    private static func refuseLockedDefaultCollection(_ service: UnsafeMutablePointer<SecretService>,
                                                      _ cancellable: UnsafeMutablePointer<GCancellable>) throws -> String? {
        var error: UnsafeMutablePointer<GError>?
        if let collection = ccred_secret_collection_for_alias_sync(service, SECRET_COLLECTION_DEFAULT, SECRET_COLLECTION_NONE, cancellable, &error) {
            let locked = ccred_secret_collection_get_locked(collection) != 0
            let path = objectPath(collection)
            ccred_g_object_unref(collection)
            if locked { throw CredentialError.keyringLocked(lockedMessage) }
            return path
        } else if error != nil {
            throw map(error, doing: "find the default keyring")
        }
        return nil
    }

    /// True for libsecret's "No such secret item" (the object went away).
    private static func isNoSuchObject(_ error: UnsafeMutablePointer<GError>?) -> Bool {
        guard let error else { return false }
        return error.pointee.domain == ccred_secret_error_quark() && error.pointee.code == Int32(SECRET_ERROR_NO_SUCH_OBJECT.rawValue)
    }

    /// Attributes for one profile; the caller owns the table.
    private static func attributes(_ profile: Profile) -> OpaquePointer {
        let table = ccred_attributes_new()!
        _ = ccred_g_hash_table_insert(table, ccred_g_strdup("service"), ccred_g_strdup(serviceName))
        _ = ccred_g_hash_table_insert(table, ccred_g_strdup("profile"), ccred_g_strdup(profile.name))
        return table
    }

    /// Every item of the profile, for a write or a delete. Refuses (`keyringLocked`) when any of
    /// them is locked: nothing is changed on a keyring we cannot fully see, not even an unlocked
    /// duplicate.
    private static func withItemsUnlessLocked<T>(_ profile: Profile, _ service: UnsafeMutablePointer<SecretService>,
                                                 _ cancellable: UnsafeMutablePointer<GCancellable>,
                                                 _ body: (OpaquePointer, [UnsafeMutablePointer<SecretItem>]) throws -> T) throws -> T {
        let attributes = Self.attributes(profile)
        defer { ccred_g_hash_table_unref(attributes) }
        let items = try Self.search(service, attributes, loadSecrets: false, cancellable)
        defer { Self.free(items) }
        let found = Self.elements(items)
        if found.contains(where: { ccred_secret_item_get_locked($0) != 0 }) {
            throw CredentialError.keyringLocked(Self.lockedMessage)
        }
        return try body(attributes, found)
    }

    /// Searches every collection without unlocking; locked matches are returned too.
    private static func search(_ service: UnsafeMutablePointer<SecretService>, _ attributes: OpaquePointer,
                               loadSecrets: Bool, _ cancellable: UnsafeMutablePointer<GCancellable>) throws -> UnsafeMutablePointer<GList>? {
        var flags = SECRET_SEARCH_ALL.rawValue
        if loadSecrets { flags |= SECRET_SEARCH_LOAD_SECRETS.rawValue }
        var error: UnsafeMutablePointer<GError>?
        let list = ccred_secret_service_search_sync(service, nil, attributes, SecretSearchFlags(rawValue: flags), cancellable, &error)
        if let error {
            Self.free(list)
            throw map(error, doing: "search for the credential")
        }
        return list
    }

    private static func elements(_ list: UnsafeMutablePointer<GList>?) -> [UnsafeMutablePointer<SecretItem>] {
        var result: [UnsafeMutablePointer<SecretItem>] = []
        var node = list
        while let n = node {
            if let data = n.pointee.data { result.append(data.assumingMemoryBound(to: SecretItem.self)) }
            node = n.pointee.next
        }
        return result
    }

    /// The strings of a NULL-terminated gchar** (not consumed).
    private static func strings(_ vector: UnsafeMutablePointer<UnsafeMutablePointer<gchar>?>?) -> [UnsafeMutablePointer<gchar>] {
        var result: [UnsafeMutablePointer<gchar>] = []
        guard var cursor = vector else { return result }
        while let s = cursor.pointee {
            result.append(s)
            cursor += 1
        }
        return result
    }

    private static func free(_ list: UnsafeMutablePointer<GList>?) {
        guard let list else { return }
        ccred_g_list_free_full(list, ccred_g_object_unref)
    }

    /// The secret copied straight out of libsecret's value into guarded memory (libsecret keeps
    /// its own copy, in its own secure memory, until the value is unreferenced).
    private static func bytes(of value: OpaquePointer) -> SecretBytes {
        var length: gsize = 0
        guard let raw = ccred_secret_value_get(value, &length), length > 0 else { return SecretBytes() }
        return SecretBytes(copying: UnsafeRawBufferPointer(start: raw, count: Int(length)))
    }
}

@_spi(CredentialOwner)
extension SecretServiceStore: CredentialStoreWriting {}
