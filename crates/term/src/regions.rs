//! The heap regions of this process, which a run's PID-namespace init lets go of.
//!
//! The init is a fork of the shim made as the program starts. It then only makes raw
//! system calls on its stack (it reaps, and writes the program's status), yet it keeps
//! its copy of every page of the shim's heap that the shim writes afterwards: most of
//! what an idle session's init costs. Once the program is started it lets those pages go.

/// The most regions kept.
const MAX: usize = 16;

/// The smallest mapping taken for heap: the allocator maps its heap in chunks of
/// megabytes, while the C library's own small mappings (among them the main thread's
/// thread-local storage) are pages.
const MIN_SIZE: usize = 1 << 20;

/// Address ranges of this process's large private anonymous read-write mappings, other
/// than those holding the calling thread's stack or its thread-local storage. A plain
/// value, so that a fork can read it from its own stack.
#[derive(Debug, Clone, Copy)]
pub struct HeapRegions {
    ranges: [(usize, usize); MAX],
    len: usize,
}

impl HeapRegions {
    /// The regions as `/proc/self/maps` shows them now (none if it cannot be read).
    pub fn now() -> HeapRegions {
        let mut regions = HeapRegions { ranges: [(0, 0); MAX], len: 0 };
        let Ok(maps) = std::fs::read_to_string("/proc/self/maps") else { return regions };
        // SAFETY: pthread_self only returns the calling thread's handle (its control
        // block, beside its thread-local storage).
        let thread = unsafe { libc::pthread_self() } as usize;
        let stack = &regions as *const HeapRegions as usize;
        for (start, end) in maps.lines().filter_map(anonymous_rw) {
            let holds = |at: usize| (start..end).contains(&at);
            if end - start >= MIN_SIZE && !holds(thread) && !holds(stack) && regions.len < MAX {
                regions.ranges[regions.len] = (start, end);
                regions.len += 1;
            }
        }
        regions
    }

    /// Drops this process's pages in the regions: reading them afterwards gives zeros.
    ///
    /// # Safety
    /// Nothing in this process may use memory in the regions afterwards: meant for a
    /// fork that makes only raw system calls on its stack from then on.
    pub unsafe fn let_go(self) {
        for &(start, end) in &self.ranges[..self.len] {
            libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_DONTNEED);
        }
    }
}

/// The range of a `/proc/self/maps` line that is a private anonymous read-write
/// mapping with no name (not the stack, the brk heap or a file's).
fn anonymous_rw(line: &str) -> Option<(usize, usize)> {
    let mut fields = line.split_whitespace();
    let (range, perms) = (fields.next()?, fields.next()?);
    // Offset, device and inode; then the name, if any.
    if perms != "rw-p" || fields.nth(3).is_some() {
        return None;
    }
    let (start, end) = range.split_once('-')?;
    Some((usize::from_str_radix(start, 16).ok()?, usize::from_str_radix(end, 16).ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_unnamed_private_writable_mappings_count() {
        let line = |s: &str| anonymous_rw(s);
        assert_eq!(line("7f0000000000-7f0000400000 rw-p 00000000 00:00 0 "), Some((0x7f00_0000_0000, 0x7f00_0040_0000)));
        assert_eq!(line("7f0000000000-7f0000400000 rw-p 00000000 00:00 0"), Some((0x7f00_0000_0000, 0x7f00_0040_0000)));
        assert_eq!(line("7ffc00000000-7ffc00021000 rw-p 00000000 00:00 0                          [stack]"), None);
        assert_eq!(line("55d000000000-55d000021000 rw-p 00000000 00:00 0                          [heap]"), None);
        assert_eq!(line("7f0000000000-7f0000001000 rw-p 00012000 08:01 1234                       /usr/lib/libc.so.6"), None);
        assert_eq!(line("7f0000000000-7f0000001000 r--p 00000000 00:00 0 "), None);
        assert_eq!(line("7f0000000000-7f0000001000 rw-s 00000000 00:05 99                         /dev/zero (deleted)"), None);
    }

    #[test]
    fn a_fork_that_lets_its_heap_go_keeps_running_on_its_stack_and_the_parent_keeps_its_heap() {
        let kept: Vec<u8> = vec![7; 8 << 20];
        let regions = HeapRegions::now();
        assert!(regions.len > 0, "no heap region found");
        let heap = kept.as_ptr() as usize;
        assert!(regions.ranges[..regions.len].iter().any(|(s, e)| (*s..*e).contains(&heap)), "the heap is not among {regions:?}");
        // SAFETY: the child makes only raw system calls on its stack after letting go.
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            // SAFETY: as above.
            unsafe {
                regions.let_go();
                libc::_exit(42)
            }
        }
        let mut status = 0;
        // SAFETY: waits for the child forked above.
        assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
        assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 42, "the child died: {status:#x}");
        assert!(kept.iter().all(|b| *b == 7), "the parent's heap changed");
    }
}
