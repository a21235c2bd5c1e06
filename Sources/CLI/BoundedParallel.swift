#if canImport(Glibc)
import Glibc
#endif
import Synchronization

/// Runs `body(0..<count)` on at most `width` threads at once and returns the results in index
/// order. For work that waits on the network (`usage --all`): each call blocks its own thread,
/// and no more than `width` requests are in flight.
enum BoundedParallel {
    static func map<T: Sendable>(count: Int, width: Int, _ body: (Int) -> T) -> [T] {
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

    /// The work queue: the next index and one result slot per index, under a mutex.
    private final class Shared<T: Sendable>: Worker {
        struct Queue {
            var next = 0
            var results: [T?]
        }
        let count: Int
        let body: (Int) -> T
        let queue: Mutex<Queue>

        init(count: Int, body: @escaping (Int) -> T) {
            self.count = count
            self.body = body
            queue = Mutex(Queue(results: Array(repeating: nil, count: count)))
            super.init()
        }

        var results: [T?] { queue.withLock { $0.results } }

        override func drain() {
            while true {
                let i = queue.withLock { queue in
                    let i = queue.next
                    queue.next += 1
                    return i
                }
                guard i < count else { return }
                let value = body(i)
                queue.withLock { $0.results[i] = value }
            }
        }
    }
}
