#if canImport(Glibc)
import Glibc
#endif

/// Runs `body(0..<count)` on at most `width` threads at once and returns the results in index
/// order. For work that waits on the network (`usage --all`): each call blocks its own thread,
/// and no more than `width` requests are in flight.
enum BoundedParallel {
    static func map<T>(count: Int, width: Int, _ body: (Int) -> T) -> [T] {
        guard count > 0 else { return [] }
        return withoutActuallyEscaping(body) { body in
            let shared = Shared<T>(count: count, body: body)
            let threads = max(1, min(width, count))
            var started: [pthread_t] = []
            for _ in 0..<threads {
                var thread = pthread_t()
                let retained = Unmanaged<Worker>.passRetained(shared).toOpaque()
                if pthread_create(&thread, nil, { raw in
                    Unmanaged<Worker>.fromOpaque(raw!).takeRetainedValue().drain()
                    return nil
                }, retained) == 0 {
                    started.append(thread)
                } else {
                    Unmanaged<Worker>.fromOpaque(retained).release()
                }
            }
            // No thread could be made: do the work here (slower, never lost).
            if started.isEmpty { shared.drain() }
            for thread in started { pthread_join(thread, nil) }
            return shared.results.map { $0! }
        }
    }

    /// What a thread runs (not generic: a C thread entry cannot capture a type parameter).
    private class Worker {
        func drain() {}
    }

    /// The work queue: the next index under a mutex, one result slot per index.
    private final class Shared<T>: Worker {
        let count: Int
        let body: (Int) -> T
        var results: [T?]
        var next = 0
        var mutex = pthread_mutex_t()

        init(count: Int, body: @escaping (Int) -> T) {
            self.count = count
            self.body = body
            results = Array(repeating: nil, count: count)
            super.init()
            pthread_mutex_init(&mutex, nil)
        }

        deinit { pthread_mutex_destroy(&mutex) }

        override func drain() {
            while true {
                pthread_mutex_lock(&mutex)
                let i = next
                next += 1
                pthread_mutex_unlock(&mutex)
                guard i < count else { return }
                let value = body(i)
                pthread_mutex_lock(&mutex)
                results[i] = value
                pthread_mutex_unlock(&mutex)
            }
        }
    }
}
