#if canImport(Glibc)
import Glibc
#endif

/// A pthread mutex with one condition variable, for the broker's work queue (`BrokerServer`):
/// `Synchronization.Mutex` has no condition to wait on. Both live in memory of their own,
/// allocated once here and freed in `deinit`, so their addresses never move (a pthread mutex must
/// not be reached through `&storedProperty`, whose address Swift does not promise to keep).
/// `@unchecked Sendable`: every call is a pthread call on those two objects, which are made for
/// use from many threads.
package final class ConditionLock: @unchecked Sendable {
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private let condition = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)

    package init() {
        mutex.initialize(to: pthread_mutex_t())
        condition.initialize(to: pthread_cond_t())
        pthread_mutex_init(mutex, nil)
        pthread_cond_init(condition, nil)
    }

    deinit {
        pthread_cond_destroy(condition)
        pthread_mutex_destroy(mutex)
        condition.deallocate()
        mutex.deallocate()
    }

    package func lock() { pthread_mutex_lock(mutex) }
    package func unlock() { pthread_mutex_unlock(mutex) }
    /// Waits for `signal` or `broadcast` (holding the lock before and after).
    package func wait() { pthread_cond_wait(condition, mutex) }
    /// Wakes one waiter (call holding the lock).
    package func signal() { pthread_cond_signal(condition) }
    /// Wakes every waiter (call holding the lock).
    package func broadcast() { pthread_cond_broadcast(condition) }
}
