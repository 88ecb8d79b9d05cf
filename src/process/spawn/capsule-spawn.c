/*
 * capsule-spawn: the runtime's spawn helper (src/process/spawn/helper.ts drives it).
 *
 * It exists because a process must be inside its cgroup before it runs one instruction of the
 * command: moving it there after spawn() leaves a window in which a fork escapes. Node cannot do
 * that itself (libuv forks and execs in one call), so Node execs this helper, which joins the
 * cgroup, optionally isolates and confines itself, and then execs the command in place.
 *
 *   capsule-spawn [--cgroup DIR] [--pidns [--confine] [--ro PATH]... [--rw PATH]... [--hide PATH]...]
 *                 [--caps] [--seccomp] [--rlimit KIND=N]... [--netns FILE]
 *                 [--uid N --gid N [--groups G,G…]] [--tty COLSxROWS] -- FILE ARGV0 [ARG…]
 *   capsule-spawn --probe [--user NAME]
 *   capsule-spawn --netns-make FILE | --netns-drop FILE
 *
 * --cgroup DIR   write our own pid into DIR/cgroup.procs first (cgroup v2; children inherit it).
 * --pidns        unshare a PID and a mount namespace; a minimal init (pid 1 there) mounts a
 *                private /proc, forks the command and reaps every orphan of the namespace. The
 *                kernel does not deliver signals that pid 1 has no handler for, so the init
 *                forwards SIGTERM, SIGINT, SIGHUP and SIGQUIT to the whole namespace
 *                (kill(-1, sig): one atomic sweep, setsid'd processes included). Our own process
 *                (the one Node started, "the leader") exits with the command's status, re-raising
 *                the signal that killed it, so exit codes 143/137 stay right; the init stays
 *                behind while anything of the namespace is alive, and when the init dies the
 *                kernel kills everything left in the namespace.
 * --confine      (with --pidns) also a cgroup namespace, rooted at the cgroup joined above (so
 *                the command can neither leave it nor see another), and the kernel's knobs
 *                read-only in the mount namespace, as a container runtime mounts them: every
 *                mount at or below /sys (the cgroup filesystems included; each cgroup2 mount is
 *                replaced by a fresh read-only one of the new cgroup namespace), every other
 *                cgroup mount, and /proc/{sys,sysrq-trigger,irq,bus,fs}; and a private /dev
 *                holding only null, zero, full, random, urandom, tty, a new devpts and a /dev/shm
 *                of its own (no disk to open raw).
 * --ro PATH      (with --pidns) bind PATH (a directory or a file) read-only, with everything
 *                mounted beneath it.
 * --rw PATH      (with --pidns) a writable exception beneath a --ro path: PATH is bound onto
 *                itself and made writable again (as far as the host had it writable).
 *                --ro and --rw paths nest in any depth: they are bound outermost first (the
 *                runtime's package read-only, the workdir in it writable, the records root in that
 *                read-only, the scratch directory in that writable; a delegated child capsule gets
 *                the parent's records read-only and its own children/<dlg_id>/ writable).
 * --hide PATH    (with --pidns) mount an empty read-only tmpfs over PATH (a directory), or, over
 *                a file (the scale-out key file), /dev/null bound read-only with nodev: opening it
 *                fails (EACCES).
 *                Every directory above a --ro, --rw or --hide path that is not a mount point yet
 *                is bound onto itself first: rename(2) refuses to move a mount point, so the
 *                command cannot rename an ancestor away and rebuild the path with files of its own.
 * --caps         before exec, keep only a container runtime's default capabilities (Docker's 14
 *                but MKNOD: KEPT_CAPS below) in the bounding, permitted, effective and inheritable
 *                sets, clear the ambient set, and set no_new_privs: a command running as root
 *                cannot mount, unmount, ptrace, load modules or gain back what was dropped.
 * --seccomp      last before exec (after no_new_privs), a seccomp filter refusing a new user
 *                namespace and setns (install_seccomp): in a user namespace of its own a root
 *                command would hold every capability again there.
 * --rlimit KIND=N  before exec, bound the command (not the init) by an rlimit, soft = hard:
 *                as (RLIMIT_AS, bytes), nproc (RLIMIT_NPROC: processes of the user, so set before
 *                the uid changes, and meaningful only for a user of its own), fsize
 *                (RLIMIT_FSIZE, bytes: SIGXFSZ), cpu (RLIMIT_CPU, seconds: SIGXCPU at N, and
 *                SIGKILL one second later for a command that ignores it). Core dumps are off
 *                whenever one is set (a killed command leaves no core in the work folder).
 *                docs/shell-commands.md#resource-limits.
 * --netns FILE  first of all (before the cgroup, while every capability is still held), join the
 *                network namespace FILE names (a --netns-make file): setns(2).
 * --netns-make FILE  make a network namespace with only the loopback interface, up, and keep it
 *                by bind-mounting it onto FILE (created empty), as `ip netns add` does; nothing
 *                runs in it until a command joins it (docs/containment.md#network).
 * --netns-drop FILE  unmount FILE (lazily: commands still in the namespace keep it until they
 *                end) and remove it.
 * --uid/--gid/--groups  drop to this uid/gid/supplementary groups (and set no_new_privs) just
 *                before exec.
 * --tty COLSxROWS  the command's stdin, stdout and stderr are a pseudo-terminal of that window
 *                size, its controlling terminal, instead of our stdio. With --pidns the init
 *                allocates it inside the namespace (after the mounts: with --confine from the
 *                namespace's own devpts, so ttyname(3) works there) and hands the master to us
 *                over a socket (SCM_RIGHTS); without, we allocate it and fork the command. Either
 *                way we (the leader, in the cgroup) stay the relay: the terminal's output goes to
 *                our stdout as it is read, our stdin to the terminal's input (its end of file as
 *                the terminal's EOF character), until the command ended and the terminal was
 *                drained (its last holder closed it, or 250 ms without output after the end).
 *                The command is confined exactly as without --tty (docs/serve.md#terminals).
 *
 * Descriptors: everything inherited above fd 3 is closed at our start, and everything above the
 * command's stdio is close-on-exec at its exec. The runtime starts us from a descriptor it opened
 * when its session began (/proc/self/fd/N, spawn/held-helper.ts), so a file put at our path later is
 * not what runs; we name ourselves "capsule-spawn" (the kernel would name us "N").
 *
 * Control channel: fd 3, when open, is a pipe to the runtime (close-on-exec here). We write
 *   "I <pid>\n"          the host pid of the namespace init (with --pidns);
 *   "E <stage> <errno>\n" setup or exec failed (stage: netns|cgroup|unshare|fork|mount|tty|caps|rlimit|user|seccomp|exec|usage),
 *                        then exit 127.
 * End of file on fd 3 without an E line means the command was exec'd.
 *
 * --probe prints "pidns ok" or "pidns <errno>" (can a PID + mount namespace with a private /proc
 * be made here?), "confine ok" or "confine <stage> <errno>" (can --confine's cgroup namespace and
 * read-only mounts be made?), "caps ok" (--caps can drop capabilities from the bounding set),
 * "caps none" (this process holds no capability: there is nothing to drop, no_new_privs is set)
 * or "caps <errno>", "seccomp ok" (the filter refuses a user namespace here) or "seccomp <errno>",
 * and, with --user NAME, "user <uid> <gid> <g,g,…>" or "user none".
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <net/if.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <poll.h>
#include <termios.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/sysmacros.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>
#include <linux/audit.h>
#include <linux/capability.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>

#define CONTROL_FD 3
#define MAX_BINDS 32
#define MAX_HIDE 8
#define MAX_GROUPS 256
#define MAX_RLIMITS 4
/* After the command ended, how long the relay keeps reading a terminal something else still holds. */
#define TTY_DRAIN_MS 250

#ifndef CLONE_NEWCGROUP
#define CLONE_NEWCGROUP 0x02000000
#endif
#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif
#ifndef SYS_close_range
#define SYS_close_range 436
#endif
#ifndef PR_CAP_AMBIENT
#define PR_CAP_AMBIENT 47
#define PR_CAP_AMBIENT_CLEAR_ALL 4
#endif
/* mount_setattr(2) (Linux 5.12): <linux/mount.h> clashes with <sys/mount.h> in older glibc. */
#ifndef SYS_mount_setattr
#define SYS_mount_setattr 442
#endif
#ifndef AT_RECURSIVE
#define AT_RECURSIVE 0x8000
#endif
#define CAPSULE_MOUNT_ATTR_RDONLY 0x00000001
#define CAPSULE_MOUNT_ATTR_NOSUID 0x00000002
#define CAPSULE_MOUNT_ATTR_NODEV 0x00000004
struct capsule_mount_attr {
  unsigned long long attr_set, attr_clr, propagation, userns_fd;
};

/* What --caps keeps: the default set of Docker and containerd but MKNOD (they also have a device
   cgroup; without one, a node made for the disk holding the records key or the runtime's package
   would read and write it raw). Not SYS_ADMIN (mount, umount, setns, …), SYS_PTRACE,
   DAC_READ_SEARCH (open_by_handle_at reaches files outside any mount), SYS_MODULE, SYS_RAWIO,
   NET_ADMIN, BPF, …: docs/security.md#what-a-step-gets. */
static const int KEPT_CAPS[] = {CAP_CHOWN,  CAP_DAC_OVERRIDE, CAP_FOWNER,     CAP_FSETID,          CAP_KILL,
                                CAP_SETGID, CAP_SETUID,       CAP_SETPCAP,    CAP_NET_BIND_SERVICE, CAP_NET_RAW,
                                CAP_SYS_CHROOT, CAP_AUDIT_WRITE, CAP_SETFCAP};
#define N_KEPT_CAPS (sizeof KEPT_CAPS / sizeof KEPT_CAPS[0])

/* Writable kernel knobs under /proc that a container runtime makes read-only. */
static const char *const PROC_READ_ONLY[] = {"/proc/sys", "/proc/sysrq-trigger", "/proc/irq", "/proc/bus", "/proc/fs"};
#define N_PROC_READ_ONLY (sizeof PROC_READ_ONLY / sizeof PROC_READ_ONLY[0])

static const int FORWARDED[] = {SIGTERM, SIGINT, SIGHUP, SIGQUIT};
#define N_FORWARDED (sizeof FORWARDED / sizeof FORWARDED[0])

static int control_open = 0;
static volatile pid_t forward_target = 0;

/* Writes all of `data`; a write that fails (EPIPE: a reader that went away) drops the rest: the
   command must never block on a terminal nobody reads, nor we on a runtime that is gone. */
static void write_all(int fd, const char *data, size_t len) {
  while (len > 0) {
    ssize_t n = write(fd, data, len);
    if (n < 0) {
      if (errno == EINTR) continue;
      return;
    }
    data += n;
    len -= (size_t)n;
  }
}

static void control_write(const char *text) {
  if (control_open) write_all(CONTROL_FD, text, strlen(text));
}

static void fail(const char *stage, int err) __attribute__((noreturn));
static void fail(const char *stage, int err) {
  char line[64];
  snprintf(line, sizeof line, "E %s %d\n", stage, err);
  control_write(line);
  _exit(127);
}

static int write_file(const char *path, const char *text) {
  int fd = open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0) return errno;
  ssize_t n = write(fd, text, strlen(text));
  int err = n < 0 ? errno : 0;
  close(fd);
  return err;
}

/* Points fds `first`..2 at /dev/null: 0 for all of stdio; 2 for our stderr alone (a terminal's
   relay: the terminal carries the command's stderr, and our stdout stays the relay's). */
static void null_stdio(int first) {
  int fd = open("/dev/null", O_RDWR | O_CLOEXEC);
  if (fd < 0) return;
  for (int target = first; target <= 2; target++) dup2(fd, target);
  if (fd < first || fd > 2) close(fd);
}

/* The init's handler: one kill(-1) reaches every process of the namespace but the init itself. */
static void forward_to_namespace(int sig) {
  int saved = errno;
  kill(-1, sig);
  errno = saved;
}

/* The leader's handler: pass the signal on to the init (which passes it to the namespace). */
static void forward_to_init(int sig) {
  int saved = errno;
  if (forward_target > 0) kill(forward_target, sig);
  errno = saved;
}

static void set_handlers(void (*handler)(int)) {
  struct sigaction action;
  memset(&action, 0, sizeof action);
  action.sa_handler = handler;
  sigemptyset(&action.sa_mask);
  for (size_t i = 0; i < N_FORWARDED; i++) sigaction(FORWARDED[i], &action, NULL);
}

static void forwarded_mask(sigset_t *set) {
  sigemptyset(set);
  for (size_t i = 0; i < N_FORWARDED; i++) sigaddset(set, FORWARDED[i]);
}

/* Ends this process the way `status` says the command ended: same exit code, or same signal. */
static void exit_like(int status) __attribute__((noreturn));
static void exit_like(int status) {
  if (WIFEXITED(status)) _exit(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    int sig = WTERMSIG(status);
    struct rlimit no_core = {0, 0};
    setrlimit(RLIMIT_CORE, &no_core);
    signal(sig, SIG_DFL);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, sig);
    sigprocmask(SIG_UNBLOCK, &set, NULL);
    kill(getpid(), sig);
    _exit(128 + sig); /* a signal whose default is to ignore it */
  }
  _exit(127);
}

struct user_spec {
  int set;
  uid_t uid;
  gid_t gid;
  int ngroups;
  gid_t groups[MAX_GROUPS];
};

/* A --ro or --rw path. */
struct bind {
  char *path;
  int writable;
};

struct rlimit_spec {
  int resource;
  rlim_t value;
};

/* What the command line asked for (see the top of this file). */
struct options {
  const char *netns;
  struct rlimit_spec rlimits[MAX_RLIMITS];
  int nrlimits;
  const char *cgroup;
  int pidns, confine, caps, seccomp;
  struct bind binds[MAX_BINDS];
  int nbinds;
  char *hide[MAX_HIDE];
  int nhide;
  struct user_spec user;
  int tty;
  unsigned short tty_cols, tty_rows;
};

static void drop_privileges(const struct user_spec *user) {
  if (!user->set) return;
  if (setgroups((size_t)user->ngroups, user->groups) != 0) fail("user", errno);
  if (setgid(user->gid) != 0) fail("user", errno);
  if (setuid(user->uid) != 0) fail("user", errno);
  /* A setuid binary must not take the step back to root. */
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) fail("user", errno);
}

/* ---- capabilities (raw syscalls: no libcap on the machines this is built on) ---- */

static int cap_kept(int cap) {
  for (size_t i = 0; i < N_KEPT_CAPS; i++)
    if (KEPT_CAPS[i] == cap) return 1;
  return 0;
}

static int cap_get(struct __user_cap_data_struct data[2]) {
  struct __user_cap_header_struct header = {_LINUX_CAPABILITY_VERSION_3, 0};
  memset(data, 0, 2 * sizeof data[0]);
  return syscall(SYS_capget, &header, data) == 0 ? 0 : errno;
}

/* Whether the bounding set holds nothing but KEPT_CAPS. */
static int bounding_confined(void) {
  for (int cap = 0; cap < 64; cap++) {
    int in = prctl(PR_CAPBSET_READ, cap, 0, 0, 0);
    if (in < 0) break; /* EINVAL: past the kernel's last capability */
    if (in == 1 && !cap_kept(cap)) return 0;
  }
  return 1;
}

/*
 * Keeps only KEPT_CAPS: dropped from the bounding set (which also bounds what exec'ing a setuid
 * or file-capability program, or root's exec, can give), the ambient set cleared, and the
 * permitted, effective and inheritable sets cut to them. Without CAP_SETPCAP (a process that is
 * not root) the bounding set cannot be changed; it holds nothing to drop then, and no_new_privs
 * (set by the caller) keeps exec from granting anything. Returns 0 or an errno.
 */
static int drop_capabilities(void) {
  struct __user_cap_header_struct header = {_LINUX_CAPABILITY_VERSION_3, 0};
  struct __user_cap_data_struct data[2];
  int err = cap_get(data);
  if (err != 0) return err;
  if ((data[0].effective >> CAP_SETPCAP) & 1) {
    for (int cap = 0; cap < 64; cap++) {
      int in = prctl(PR_CAPBSET_READ, cap, 0, 0, 0);
      if (in < 0) break;
      if (in == 1 && !cap_kept(cap) && prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0) return errno;
    }
  }
  if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) != 0 && errno != EINVAL) return errno;
  unsigned int keep[2] = {0, 0};
  for (size_t i = 0; i < N_KEPT_CAPS; i++) keep[KEPT_CAPS[i] / 32] |= 1u << (KEPT_CAPS[i] % 32);
  for (int i = 0; i < 2; i++) {
    data[i].effective &= keep[i];
    data[i].permitted &= keep[i];
    data[i].inheritable &= keep[i];
  }
  if (syscall(SYS_capset, &header, data) != 0) return errno;
  return 0;
}

/* --rlimit's bounds, before the uid changes (RLIMIT_NPROC is checked against the new user's count). */
static void set_rlimits(const struct options *o) {
  for (int i = 0; i < o->nrlimits; i++) {
    struct rlimit limit = {o->rlimits[i].value, o->rlimits[i].value};
    if (o->rlimits[i].resource == RLIMIT_CPU) limit.rlim_max = o->rlimits[i].value + 1;
    if (setrlimit(o->rlimits[i].resource, &limit) != 0) fail("rlimit", errno);
  }
  if (o->nrlimits > 0) {
    struct rlimit no_core = {0, 0};
    if (setrlimit(RLIMIT_CORE, &no_core) != 0) fail("rlimit", errno);
  }
}

static int parse_rlimit(const char *text, struct rlimit_spec *out) {
  static const struct {
    const char *name;
    int resource;
  } KINDS[] = {{"as", RLIMIT_AS}, {"nproc", RLIMIT_NPROC}, {"fsize", RLIMIT_FSIZE}, {"cpu", RLIMIT_CPU}};
  const char *eq = strchr(text, '=');
  if (eq == NULL) return -1;
  for (size_t k = 0; k < sizeof KINDS / sizeof KINDS[0]; k++) {
    if (strlen(KINDS[k].name) != (size_t)(eq - text) || strncmp(text, KINDS[k].name, (size_t)(eq - text)) != 0) continue;
    char *end;
    errno = 0;
    unsigned long long value = strtoull(eq + 1, &end, 10);
    if (errno != 0 || eq[1] == '\0' || *end != '\0' || value == 0) return -1;
    out->resource = KINDS[k].resource;
    out->value = (rlim_t)value;
    return 0;
  }
  return -1;
}

/* ---- the seccomp filter (raw BPF: no libseccomp on the machines this is built on) ---- */

/*
 * What --caps refuses, as a container runtime's default profile does: a new user namespace
 * (unshare or clone with CLONE_NEWUSER: EPERM; clone3, whose flags sit in memory a filter cannot
 * read: ENOSYS, so that libc falls back to clone), and setns (EPERM). In a user namespace of its
 * own a root step holds every capability again there: it could mount a fresh cgroup v1 hierarchy
 * (freeze or starve processes outside its tree) or tmpfs. setns too: a root step holds every
 * capability in any user namespace uid 0 owns, so joining one it can reach (a namespace file
 * bound somewhere, another process's /proc/<pid>/ns without a PID namespace) would do the same;
 * a confined step has no other use for it (every other namespace needs CAP_SYS_ADMIN).
 * Both ABIs a process of this architecture can call the kernel with are filtered (x86_64 with
 * x32, and i386; aarch64 and arm); a call of any other ABI is refused (ENOSYS).
 */
#if defined(__x86_64__)
#define SECCOMP_NATIVE_ARCH AUDIT_ARCH_X86_64
#define SECCOMP_NATIVE_MASK 0xBFFFFFFFu /* x32 numbers are x86_64's with bit 30 set */
#define SECCOMP_COMPAT_ARCH AUDIT_ARCH_I386
#define COMPAT_NR_UNSHARE 310
#define COMPAT_NR_CLONE 120
#define COMPAT_NR_SETNS 346
#elif defined(__aarch64__)
#define SECCOMP_NATIVE_ARCH AUDIT_ARCH_AARCH64
#define SECCOMP_NATIVE_MASK 0xFFFFFFFFu
#define SECCOMP_COMPAT_ARCH AUDIT_ARCH_ARM
#define COMPAT_NR_UNSHARE 337
#define COMPAT_NR_CLONE 120
#define COMPAT_NR_SETNS 375
#endif
#define NR_CLONE3 435 /* the same on every architecture */

#ifdef SECCOMP_NATIVE_ARCH
/* A jump from instruction `at` to `to` (classic BPF counts from the next instruction). */
#define TO(at, to) ((unsigned char)((to) - (at) - 1))
enum { F_ARCH, F_IS_NATIVE, F_NR, F_MASK, F_UNSHARE, F_CLONE, F_CLONE3, F_SETNS, F_NATIVE_ALLOW,
       F_IS_COMPAT, F_CNR, F_CUNSHARE, F_CCLONE, F_CCLONE3, F_CSETNS, F_COMPAT_ALLOW, F_OTHER,
       F_FLAGS, F_NEWUSER, F_ALLOW, F_EPERM, F_ENOSYS, F_LENGTH };
static int install_seccomp(void) {
  struct sock_filter filter[F_LENGTH] = {
    [F_ARCH] = BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
    [F_IS_NATIVE] = BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SECCOMP_NATIVE_ARCH, 0, TO(F_IS_NATIVE, F_IS_COMPAT)),
    [F_NR] = BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
    [F_MASK] = BPF_STMT(BPF_ALU | BPF_AND | BPF_K, SECCOMP_NATIVE_MASK),
    [F_UNSHARE] = BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_unshare, TO(F_UNSHARE, F_FLAGS), 0),
    [F_CLONE] = BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_clone, TO(F_CLONE, F_FLAGS), 0),
    [F_CLONE3] = BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, NR_CLONE3, TO(F_CLONE3, F_ENOSYS), 0),
    [F_SETNS] = BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_setns, TO(F_SETNS, F_EPERM), 0),
    [F_NATIVE_ALLOW] = BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    [F_IS_COMPAT] = BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SECCOMP_COMPAT_ARCH, 0, TO(F_IS_COMPAT, F_OTHER)),
    [F_CNR] = BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
    [F_CUNSHARE] = BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, COMPAT_NR_UNSHARE, TO(F_CUNSHARE, F_FLAGS), 0),
    [F_CCLONE] = BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, COMPAT_NR_CLONE, TO(F_CCLONE, F_FLAGS), 0),
    [F_CCLONE3] = BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, NR_CLONE3, TO(F_CCLONE3, F_ENOSYS), 0),
    [F_CSETNS] = BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, COMPAT_NR_SETNS, TO(F_CSETNS, F_EPERM), 0),
    [F_COMPAT_ALLOW] = BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    [F_OTHER] = BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS),
    /* unshare's and clone's flags are their first argument on these architectures (the low word:
       CLONE_NEWUSER is bit 28; little-endian). */
    [F_FLAGS] = BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[0])),
    [F_NEWUSER] = BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, CLONE_NEWUSER, TO(F_NEWUSER, F_EPERM), TO(F_NEWUSER, F_ALLOW)),
    [F_ALLOW] = BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    [F_EPERM] = BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
    [F_ENOSYS] = BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS),
  };
  struct sock_fprog program = {F_LENGTH, filter};
  return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &program, 0, 0) == 0 ? 0 : errno;
}
#else
static int install_seccomp(void) { return EAFNOSUPPORT; /* an architecture the filter does not know */ }
#endif

/* Nothing the runtime (or whoever started it) holds open reaches the command: every descriptor
   above its stdio is closed at its exec. The control channel (fd 3) stays open until then. */
static void cloexec_above_stdio(void) {
  if (syscall(SYS_close_range, 3, ~0U, CLOSE_RANGE_CLOEXEC) == 0) return;
  struct rlimit limit;
  int max = getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur < 65536 ? (int)limit.rlim_cur : 65536;
  for (int fd = 3; fd < max; fd++) fcntl(fd, F_SETFD, FD_CLOEXEC);
}

/* The last thing before exec: the rlimits, --caps, then the run-as user (which needs CAP_SETUID/SETGID, kept), then the seccomp filter. */
static void confine_command(const struct options *o) {
  cloexec_above_stdio();
  set_rlimits(o);
  if (o->caps) {
    int err = drop_capabilities();
    if (err != 0) fail("caps", err);
  }
  drop_privileges(&o->user);
  if (o->caps && prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) fail("caps", errno);
  /* After no_new_privs (the kernel requires it without CAP_SYS_ADMIN); nothing but exec follows. */
  if (o->seccomp) {
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) fail("seccomp", errno);
    int err = install_seccomp();
    if (err != 0) fail("seccomp", err);
  }
}

/* ---- the mount namespace ---- */

/* The mounts of our mount namespace: /proc/self/mountinfo, then what we mount on top. */
struct mount_entry {
  char *point;
  char *type;
  int readonly; /* read-only in the host's view (from mountinfo; 0 for mounts we made) */
};
static struct mount_entry *mounts = NULL;
static int n_mounts = 0, mounts_cap = 0;

static int add_mount(const char *point, const char *type) {
  if (n_mounts == mounts_cap) {
    int cap = mounts_cap == 0 ? 64 : mounts_cap * 2;
    struct mount_entry *grown = realloc(mounts, (size_t)cap * sizeof *grown);
    if (grown == NULL) return ENOMEM;
    mounts = grown;
    mounts_cap = cap;
  }
  char *p = strdup(point), *t = strdup(type);
  if (p == NULL || t == NULL) return ENOMEM;
  mounts[n_mounts].point = p;
  mounts[n_mounts].type = t;
  mounts[n_mounts].readonly = 0;
  n_mounts++;
  return 0;
}

/* mountinfo escapes space, tab, newline and backslash as \ooo. */
static void unescape(char *text) {
  char *out = text;
  for (char *in = text; *in != '\0'; in++) {
    if (in[0] == '\\' && in[1] >= '0' && in[1] <= '3' && in[2] >= '0' && in[2] <= '7' && in[3] >= '0' && in[3] <= '7') {
      *out++ = (char)((in[1] - '0') * 64 + (in[2] - '0') * 8 + (in[3] - '0'));
      in += 3;
    } else {
      *out++ = *in;
    }
  }
  *out = '\0';
}

static int read_mounts(void) {
  FILE *file = fopen("/proc/self/mountinfo", "re");
  if (file == NULL) return errno;
  char *line = NULL;
  size_t size = 0;
  int err = 0;
  while (err == 0 && getline(&line, &size, file) > 0) {
    /* id parent major:minor root POINT options [optional…] - TYPE source super-options */
    char *separator = strstr(line, " - ");
    if (separator == NULL) continue;
    *separator = '\0';
    char *type = separator + 3;
    type[strcspn(type, " \n")] = '\0';
    char *field = line, *point = NULL, *options = NULL;
    for (int i = 0; i < 6 && field != NULL; i++) {
      char *next = strchr(field, ' ');
      if (next != NULL) *next++ = '\0';
      if (i == 4) point = field;
      if (i == 5) options = field;
      field = next;
    }
    if (point == NULL) continue;
    unescape(point);
    err = add_mount(point, type);
    if (err == 0 && options != NULL) mounts[n_mounts - 1].readonly = strncmp(options, "ro", 2) == 0 && (options[2] == ',' || options[2] == '\0');
  }
  free(line);
  fclose(file);
  return err;
}

static int is_mount_point(const char *path) {
  for (int i = 0; i < n_mounts; i++)
    if (strcmp(mounts[i].point, path) == 0) return 1;
  return 0;
}

/* Whether `point` is `path` or beneath it. */
static int at_or_below(const char *point, const char *path) {
  size_t len = strlen(path);
  if (strcmp(path, "/") == 0) return 1;
  return strncmp(point, path, len) == 0 && (point[len] == '\0' || point[len] == '/');
}

/* Makes the visible mount at `point` read-only (per mount: the filesystem itself is untouched),
   keeping its other flags and adding `extra`. A point hidden by a later mount is skipped. */
static int remount_readonly(const char *point, unsigned long extra) {
  struct statvfs st;
  if (statvfs(point, &st) != 0) return errno == ENOENT || errno == EACCES ? 0 : errno;
  unsigned long flags = MS_BIND | MS_REMOUNT | MS_RDONLY | extra;
  if (st.f_flag & ST_NOSUID) flags |= MS_NOSUID;
  if (st.f_flag & ST_NODEV) flags |= MS_NODEV;
  if (st.f_flag & ST_NOEXEC) flags |= MS_NOEXEC;
  if (st.f_flag & ST_NOATIME) flags |= MS_NOATIME;
  if (st.f_flag & ST_NODIRATIME) flags |= MS_NODIRATIME;
  if (st.f_flag & ST_RELATIME) flags |= MS_RELATIME;
  return mount(NULL, point, NULL, flags, NULL) == 0 ? 0 : errno;
}

/* Makes the mount at `path` and every mount beneath it read-only (and nosuid, nodev with
   `strict`): one mount_setattr(2) where the kernel has it, else one remount per mount. */
static int readonly_tree(const char *path, int strict) {
  struct capsule_mount_attr attr = {CAPSULE_MOUNT_ATTR_RDONLY | (strict ? CAPSULE_MOUNT_ATTR_NOSUID | CAPSULE_MOUNT_ATTR_NODEV : 0), 0, 0, 0};
  if (syscall(SYS_mount_setattr, AT_FDCWD, path, AT_RECURSIVE, &attr, sizeof attr) == 0) return 0;
  if (errno != ENOSYS && errno != EPERM) return errno;
  int err = remount_readonly(path, strict ? MS_NOSUID | MS_NODEV : 0);
  for (int i = 0; err == 0 && i < n_mounts; i++)
    if (strcmp(mounts[i].point, path) != 0 && at_or_below(mounts[i].point, path)) err = remount_readonly(mounts[i].point, strict ? MS_NOSUID | MS_NODEV : 0);
  return err;
}

static int bind_readonly(const char *path) {
  if (mount(path, path, NULL, MS_BIND | MS_REC, NULL) != 0) return errno;
  int err = add_mount(path, "bind");
  return err != 0 ? err : readonly_tree(path, 1);
}

/* The device nodes of a private /dev (what a container runtime gives), each 0666. */
static const struct {
  const char *name;
  unsigned major, minor;
} DEV_NODES[] = {{"null", 1, 3}, {"zero", 1, 5}, {"full", 1, 7}, {"random", 1, 8}, {"urandom", 1, 9}, {"tty", 5, 0}};
#define N_DEV_NODES (sizeof DEV_NODES / sizeof DEV_NODES[0])

/*
 * --confine's /dev: a fresh tmpfs holding only the harmless devices, a new devpts instance and a
 * /dev/shm of its own, instead of the host's /dev, where root may open every disk (a raw read of
 * the disk holding the records key or the runtime's package undoes every read-only bind and the
 * hidden key). The command keeps no CAP_MKNOD (KEPT_CAPS) to make a disk's node elsewhere.
 */
static int private_dev(void) {
  if (mount("tmpfs", "/dev", "tmpfs", MS_NOSUID | MS_NOEXEC, "mode=755,size=64k") != 0) return errno;
  int err = add_mount("/dev", "tmpfs");
  if (err != 0) return err;
  mode_t mask = umask(0);
  err = 0;
  for (size_t i = 0; err == 0 && i < N_DEV_NODES; i++) {
    char path[64];
    snprintf(path, sizeof path, "/dev/%s", DEV_NODES[i].name);
    if (mknod(path, S_IFCHR | 0666, makedev(DEV_NODES[i].major, DEV_NODES[i].minor)) != 0) err = errno;
  }
  static const char *const links[][2] = {{"/proc/self/fd", "/dev/fd"},     {"/proc/self/fd/0", "/dev/stdin"}, {"/proc/self/fd/1", "/dev/stdout"},
                                         {"/proc/self/fd/2", "/dev/stderr"}, {"pts/ptmx", "/dev/ptmx"}};
  for (size_t i = 0; err == 0 && i < sizeof links / sizeof links[0]; i++)
    if (symlink(links[i][0], links[i][1]) != 0) err = errno;
  if (err == 0 && (mkdir("/dev/pts", 0755) != 0 || mkdir("/dev/shm", 01777) != 0)) err = errno;
  umask(mask);
  if (err != 0) return err;
  if (mount("devpts", "/dev/pts", "devpts", MS_NOSUID | MS_NOEXEC, "newinstance,ptmxmode=0666,mode=0620") != 0) return errno;
  if (mount("tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777") != 0) return errno;
  if ((err = add_mount("/dev/pts", "devpts")) != 0 || (err = add_mount("/dev/shm", "tmpfs")) != 0) return err;
  return 0;
}

/*
 * --confine's mounts: /sys (cgroup filesystems included) and the writable knobs of /proc
 * read-only, and a fresh read-only cgroup2 over each cgroup2 mount, which in our new cgroup
 * namespace shows the joined cgroup as its root and nothing above or beside it. Without the
 * namespace a read-only mount would not be enough: clone3(CLONE_INTO_CGROUP) checks the cgroup
 * files' permissions, not the mount's, and only the namespace's root bounds where it may go.
 */
static int confine_mounts(void) {
  for (size_t i = 0; i < N_PROC_READ_ONLY; i++) {
    if (access(PROC_READ_ONLY[i], F_OK) != 0) continue;
    int err = bind_readonly(PROC_READ_ONLY[i]);
    if (err != 0) return err;
  }
  int known = n_mounts;
  if (is_mount_point("/sys")) {
    int err = readonly_tree("/sys", 0);
    if (err != 0) return err;
  }
  for (int i = 0; i < known; i++) {
    const char *type = mounts[i].type;
    if ((strcmp(type, "cgroup") == 0 || strcmp(type, "cgroup2") == 0) && !at_or_below(mounts[i].point, "/sys")) {
      int err = remount_readonly(mounts[i].point, 0);
      if (err != 0) return err;
    }
  }
  for (int i = 0; i < known; i++) {
    if (strcmp(mounts[i].type, "cgroup2") != 0) continue;
    int seen = 0;
    for (int j = 0; j < i; j++)
      if (strcmp(mounts[j].type, "cgroup2") == 0 && strcmp(mounts[j].point, mounts[i].point) == 0) seen = 1;
    if (seen) continue;
    /* The kernel refuses a filesystem on a mount point where it is already the mount's root
       (EBUSY): the host's view is taken away first. Read-only per mount, after mounting: the one
       cgroup2 superblock is writable (EBUSY again). */
    if (umount2(mounts[i].point, MNT_DETACH) != 0) return errno;
    if (mount("cgroup2", mounts[i].point, "cgroup2", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) != 0) return errno;
    int err = remount_readonly(mounts[i].point, MS_NOSUID | MS_NODEV | MS_NOEXEC);
    if (err != 0) return err;
  }
  return private_dev();
}

/* Binds every directory above `path` that is not a mount point onto itself: rename(2) of a
   mount point fails (EBUSY), so no ancestor can be moved away and the path rebuilt. */
static int pin_ancestors(const char *path) {
  char prefix[4096];
  size_t len = strlen(path);
  if (path[0] != '/') return EINVAL;
  if (len >= sizeof prefix) return ENAMETOOLONG;
  for (size_t i = 1; i < len; i++) {
    if (path[i] != '/') continue;
    memcpy(prefix, path, i);
    prefix[i] = '\0';
    if (is_mount_point(prefix)) continue;
    if (mount(prefix, prefix, NULL, MS_BIND | MS_REC, NULL) != 0) return errno;
    int err = add_mount(prefix, "bind");
    if (err != 0) return err;
  }
  return 0;
}

/*
 * A --rw exception: bound onto itself (a bind copies the read-only flag of the mount it is made
 * from, and the mounts beneath it), then writable again — only what was writable in the host's
 * view: the path's own mount and every mount beneath it that the host had read-only stay so.
 */
static int bind_writable(const char *path, int host_readonly) {
  int known = n_mounts;
  if (mount(path, path, NULL, MS_BIND | MS_REC, NULL) != 0) return errno;
  int err = add_mount(path, "bind");
  if (err != 0) return err;
  struct capsule_mount_attr attr = {CAPSULE_MOUNT_ATTR_NOSUID | CAPSULE_MOUNT_ATTR_NODEV, CAPSULE_MOUNT_ATTR_RDONLY, 0, 0};
  if (syscall(SYS_mount_setattr, AT_FDCWD, path, AT_RECURSIVE, &attr, sizeof attr) != 0) {
    if (errno != ENOSYS && errno != EPERM) return errno;
    /* Without mount_setattr: the path's own mount only (a remount is per mount). */
    if (mount(NULL, path, NULL, MS_BIND | MS_REMOUNT | MS_NOSUID | MS_NODEV, NULL) != 0) return errno;
  }
  if (host_readonly && (err = remount_readonly(path, MS_NOSUID | MS_NODEV)) != 0) return err;
  for (int i = 0; i < known; i++)
    if (mounts[i].readonly && strcmp(mounts[i].point, path) != 0 && at_or_below(mounts[i].point, path) && (err = remount_readonly(mounts[i].point, 0)) != 0) return err;
  return 0;
}

/* Whether `path` is on a read-only mount in the host's view (before we mount anything). */
static int host_readonly(const char *path) {
  struct statvfs st;
  return statvfs(path, &st) == 0 && (st.f_flag & ST_RDONLY) != 0;
}

/* Everything the mount namespace gets once / is private and /proc is ours. */
static void setup_mounts(const struct options *o) {
  int err = read_mounts();
  if (err != 0) fail("mount", err);
  int host_ro[MAX_BINDS];
  for (int i = 0; i < o->nbinds; i++) host_ro[i] = o->binds[i].writable && host_readonly(o->binds[i].path);
  if (o->confine && (err = confine_mounts()) != 0) fail("mount", err);
  /*
   * Outermost first: a --rw exception beneath a --ro path is bound after it, a --ro path beneath
   * that exception after the exception (the package read-only, the workdir in it writable, the
   * records root in that read-only, the scratch directory in that writable). A shorter path is
   * never beneath a longer one, so sorting by length orders every path after its ancestors. The
   * directories above each path are pinned just before it is bound, so that a pin is a copy of
   * the mount it is made from as it is by then (read-only inside a --ro path, writable inside an
   * exception).
   */
  int order[MAX_BINDS];
  for (int i = 0; i < o->nbinds; i++) {
    int j = i;
    while (j > 0 && strlen(o->binds[order[j - 1]].path) > strlen(o->binds[i].path)) {
      order[j] = order[j - 1];
      j--;
    }
    order[j] = i;
  }
  for (int k = 0; k < o->nbinds; k++) {
    const struct bind *b = &o->binds[order[k]];
    if ((err = pin_ancestors(b->path)) != 0) fail("mount", err);
    err = b->writable ? bind_writable(b->path, host_ro[order[k]]) : bind_readonly(b->path);
    if (err != 0) fail("mount", err);
  }
  for (int i = 0; i < o->nhide; i++) {
    if ((err = pin_ancestors(o->hide[i])) != 0) fail("mount", err);
    struct stat st;
    if (stat(o->hide[i], &st) == 0 && !S_ISDIR(st.st_mode)) {
      /* A file cannot take a tmpfs; a device node on a nodev mount cannot be opened, so nothing is read through it. */
      if (mount("/dev/null", o->hide[i], NULL, MS_BIND, NULL) != 0) fail("mount", errno);
      if (mount(NULL, o->hide[i], NULL, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) != 0) fail("mount", errno);
      continue;
    }
    if (mount("tmpfs", o->hide[i], "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=4k,mode=000") != 0) fail("mount", errno);
  }
}

/* ---- network namespaces ---- */

static int wait_exit_code(pid_t child);

/* Brings the loopback interface of our (new) network namespace up. */
static int loopback_up(void) {
  int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return errno;
  struct ifreq req;
  memset(&req, 0, sizeof req);
  strncpy(req.ifr_name, "lo", IFNAMSIZ - 1);
  int err = 0;
  if (ioctl(fd, SIOCGIFFLAGS, &req) != 0) err = errno;
  else {
    req.ifr_flags |= IFF_UP;
    if (ioctl(fd, SIOCSIFFLAGS, &req) != 0) err = errno;
  }
  close(fd);
  return err;
}

/* --netns-make: in a child (our own namespace stays the host's), unshare the network namespace,
   bring lo up and bind it onto FILE. Prints "netns ok" or "netns <stage> <errno>"; exits 0 or 1. */
static int netns_make(const char *file) {
  int fd = open(file, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0444);
  if (fd < 0) {
    printf("netns create %d\n", errno);
    return 1;
  }
  close(fd);
  int report[2];
  if (pipe2(report, O_CLOEXEC) != 0) {
    printf("netns fork %d\n", errno);
    unlink(file);
    return 1;
  }
  fflush(stdout);
  pid_t child = fork();
  if (child < 0) {
    printf("netns fork %d\n", errno);
    unlink(file);
    return 1;
  }
  if (child == 0) {
    close(report[0]);
    const char *stage = NULL;
    int err = 0;
    if (unshare(CLONE_NEWNET) != 0) stage = "unshare", err = errno;
    else if ((err = loopback_up()) != 0) stage = "loopback";
    else if (mount("/proc/self/ns/net", file, NULL, MS_BIND, NULL) != 0) stage = "mount", err = errno;
    if (stage != NULL) {
      char line[64];
      int n = snprintf(line, sizeof line, "%s %d", stage, err);
      ssize_t ignored = write(report[1], line, (size_t)n);
      (void)ignored;
      _exit(1);
    }
    _exit(0);
  }
  close(report[1]);
  char text[64];
  ssize_t got = read(report[0], text, sizeof text - 1);
  close(report[0]);
  text[got > 0 ? got : 0] = '\0';
  int code = wait_exit_code(child);
  if (code == 0 && got <= 0) {
    printf("netns ok\n");
    return 0;
  }
  unlink(file);
  if (got > 0) printf("netns %s\n", text);
  else printf("netns exit %d\n", code);
  return 1;
}

static int netns_drop(const char *file) {
  if (umount2(file, MNT_DETACH) != 0 && errno != EINVAL && errno != ENOENT) {
    printf("netns umount %d\n", errno);
    return 1;
  }
  if (unlink(file) != 0 && errno != ENOENT) {
    printf("netns unlink %d\n", errno);
    return 1;
  }
  printf("netns ok\n");
  return 0;
}

/* --netns: join the namespace bound on FILE. A FILE that is not a network namespace (the session
   ended and the file is gone, or something else is there) fails: the command never runs on the
   host's network by mistake. */
static void join_netns(const char *file) {
  int fd = open(file, O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail("netns", errno);
  if (setns(fd, CLONE_NEWNET) != 0) fail("netns", errno);
  close(fd);
}

static void exec_command(char *const argv[], const char *file) __attribute__((noreturn));
static void exec_command(char *const argv[], const char *file) {
  execv(file, argv);
  if (errno == ENOEXEC) {
    /* As execvp(3) does (and so a direct spawn from Node): a file without a known format is a
       shell script. */
    int argc = 0;
    while (argv[argc] != NULL) argc++;
    char **script = calloc((size_t)argc + 2, sizeof *script);
    if (script != NULL) {
      script[0] = (char *)"/bin/sh";
      script[1] = (char *)file;
      for (int i = 1; i < argc; i++) script[i + 1] = argv[i];
      execv("/bin/sh", script);
    }
    errno = ENOEXEC;
  }
  fail("exec", errno);
}


/* ---- the pseudo-terminal (--tty) ---- */

#ifndef TIOCGPTPEER
#define TIOCGPTPEER _IO('T', 0x41)
#endif

/* A new pseudo-terminal of --tty's window size, from the /dev/ptmx of our mount namespace: its
   master and its slave, both close-on-exec (the command gets the slave as its stdio by dup2). */
static int open_terminal(const struct options *o, int *master_out, int *slave_out) {
  int master = open("/dev/ptmx", O_RDWR | O_NOCTTY | O_CLOEXEC);
  if (master < 0) return errno;
  int unlock = 0;
  int slave = -1;
  if (ioctl(master, TIOCSPTLCK, &unlock) == 0) {
    slave = ioctl(master, TIOCGPTPEER, O_RDWR | O_NOCTTY | O_CLOEXEC);
    if (slave < 0) {
      /* Before Linux 4.13: by name, from the same devpts. */
      char name[64];
      if (ptsname_r(master, name, sizeof name) == 0) slave = open(name, O_RDWR | O_NOCTTY | O_CLOEXEC);
    }
  }
  if (slave < 0) {
    int err = errno;
    close(master);
    return err;
  }
  struct winsize size;
  memset(&size, 0, sizeof size);
  size.ws_col = o->tty_cols;
  size.ws_row = o->tty_rows;
  if (ioctl(slave, TIOCSWINSZ, &size) != 0) {
    int err = errno;
    close(master);
    close(slave);
    return err;
  }
  *master_out = master;
  *slave_out = slave;
  return 0;
}

/* In the command's process: the terminal becomes its stdin, stdout and stderr. */
static void terminal_stdio(int slave) {
  if (dup2(slave, 0) < 0 || dup2(slave, 1) < 0 || dup2(slave, 2) < 0) fail("tty", errno);
  if (slave > 2) close(slave);
}

/* Hands `fd` over `sock` (SCM_RIGHTS). */
static int send_fd(int sock, int fd) {
  char byte = 'T';
  struct iovec iov = {&byte, 1};
  union {
    struct cmsghdr header;
    char bytes[CMSG_SPACE(sizeof(int))];
  } control;
  memset(&control, 0, sizeof control);
  struct msghdr message;
  memset(&message, 0, sizeof message);
  message.msg_iov = &iov;
  message.msg_iovlen = 1;
  message.msg_control = control.bytes;
  message.msg_controllen = sizeof control.bytes;
  struct cmsghdr *header = CMSG_FIRSTHDR(&message);
  header->cmsg_level = SOL_SOCKET;
  header->cmsg_type = SCM_RIGHTS;
  header->cmsg_len = CMSG_LEN(sizeof(int));
  memcpy(CMSG_DATA(header), &fd, sizeof fd);
  while (sendmsg(sock, &message, MSG_NOSIGNAL) < 0)
    if (errno != EINTR) return errno;
  return 0;
}

/* The descriptor sent over `sock`, or -1 (the sender ended without one: its setup failed). */
static int recv_fd(int sock) {
  char byte;
  struct iovec iov = {&byte, 1};
  union {
    struct cmsghdr header;
    char bytes[CMSG_SPACE(sizeof(int))];
  } control;
  memset(&control, 0, sizeof control);
  struct msghdr message;
  memset(&message, 0, sizeof message);
  message.msg_iov = &iov;
  message.msg_iovlen = 1;
  message.msg_control = control.bytes;
  message.msg_controllen = sizeof control.bytes;
  ssize_t n;
  while ((n = recvmsg(sock, &message, MSG_CMSG_CLOEXEC)) < 0)
    if (errno != EINTR) return -1;
  if (n <= 0) return -1;
  for (struct cmsghdr *header = CMSG_FIRSTHDR(&message); header != NULL; header = CMSG_NXTHDR(&message, header)) {
    if (header->cmsg_level == SOL_SOCKET && header->cmsg_type == SCM_RIGHTS) {
      int fd;
      memcpy(&fd, CMSG_DATA(header), sizeof fd);
      return fd;
    }
  }
  return -1;
}

/*
 * The relay between the terminal's master and our stdio, until the command ended and the
 * terminal is drained. How the end is learned: `status_fd` (with --pidns: the init's status
 * pipe, one int written at once) or else `child` (our own child). Returns 1 with the command's
 * wait status in `*status`, or 0 when it is not known (the init ended without sending it).
 */
static int relay_terminal(int master, int status_fd, pid_t child, int *status) {
  fcntl(master, F_SETFL, fcntl(master, F_GETFL) | O_NONBLOCK);
  int exit_fd = status_fd;
  if (exit_fd < 0) exit_fd = (int)syscall(SYS_pidfd_open, child, 0); /* -1 before Linux 5.3: polled */
  static char out[65536];
  char in[4096];
  size_t in_len = 0, in_off = 0;
  int in_open = 1, master_open = 1, ended = 0, known = 0;
  while (master_open) {
    struct pollfd fds[3];
    nfds_t n = 0;
    int input = -1, exit_at = -1;
    fds[n++] = (struct pollfd){master, (short)(POLLIN | (in_off < in_len ? POLLOUT : 0)), 0};
    if (in_open && in_off == in_len) {
      input = (int)n;
      fds[n++] = (struct pollfd){0, POLLIN, 0};
    }
    if (!ended && exit_fd >= 0) {
      exit_at = (int)n;
      fds[n++] = (struct pollfd){exit_fd, POLLIN, 0};
    }
    int ready = poll(fds, n, ended ? TTY_DRAIN_MS : exit_fd < 0 ? 50 : -1);
    if (ready < 0) {
      if (errno == EINTR) continue;
      break;
    }
    if (ready == 0 && ended) break; /* nothing more within the drain: something else holds it */
    if (fds[0].revents & (POLLIN | POLLHUP | POLLERR)) {
      ssize_t got = read(master, out, sizeof out);
      if (got > 0) write_all(1, out, (size_t)got);
      else if (got == 0 || (errno != EAGAIN && errno != EINTR)) master_open = 0; /* EIO: no one holds the terminal */
    }
    if (master_open && (fds[0].revents & POLLOUT) && in_off < in_len) {
      ssize_t put = write(master, in + in_off, in_len - in_off);
      if (put > 0) in_off += (size_t)put;
      else if (put < 0 && errno != EAGAIN && errno != EINTR) in_off = in_len;
    }
    if (input >= 0 && (fds[input].revents & (POLLIN | POLLHUP | POLLERR))) {
      ssize_t got = read(0, in, sizeof in);
      if (got > 0) {
        in_len = (size_t)got;
        in_off = 0;
      } else if (got == 0 || (errno != EAGAIN && errno != EINTR)) {
        /* Our stdin's end is the terminal's end-of-file character (^D), typed once. */
        in_open = 0;
        struct termios modes;
        in[0] = tcgetattr(master, &modes) == 0 && modes.c_cc[VEOF] != 0 ? (char)modes.c_cc[VEOF] : 4;
        in_len = 1;
        in_off = 0;
      }
    }
    if (!ended && status_fd >= 0 && exit_at >= 0 && fds[exit_at].revents != 0) {
      ssize_t got = read(status_fd, status, sizeof *status);
      if (got < 0 && errno == EINTR) continue;
      ended = 1;
      known = got == (ssize_t)sizeof *status;
    } else if (!ended && status_fd < 0 && (exit_fd < 0 || (exit_at >= 0 && fds[exit_at].revents != 0))) {
      if (waitpid(child, status, WNOHANG) == child) ended = known = 1;
    }
  }
  if (status_fd < 0 && exit_fd >= 0) close(exit_fd);
  if (ended) return known;
  if (status_fd >= 0) {
    ssize_t got;
    while ((got = read(status_fd, status, sizeof *status)) < 0 && errno == EINTR) {
    }
    return got == (ssize_t)sizeof *status;
  }
  while (waitpid(child, status, 0) < 0)
    if (errno != EINTR) return 0;
  return 1;
}

/*
 * --tty without --pidns: we are the relay, the command our child. We lead our session (Node
 * starts us detached, setsid), so the terminal becomes the session's controlling terminal and the
 * command, in our session and process group, has it too: a signal to the group reaches it.
 */
static void run_with_terminal(char *const argv[], const char *file, const struct options *o) __attribute__((noreturn));
static void run_with_terminal(char *const argv[], const char *file, const struct options *o) {
  int master, slave;
  int err = open_terminal(o, &master, &slave);
  if (err != 0) fail("tty", err);
  /* Started otherwise than detached, we lead no session yet: lead one if we can; if not, the
     terminal is still the command's stdio, only not its controlling terminal. */
  if (getsid(0) != getpid()) (void)setsid();
  (void)ioctl(slave, TIOCSCTTY, 0);
  pid_t command = fork();
  if (command < 0) fail("fork", errno);
  if (command == 0) {
    close(master);
    terminal_stdio(slave);
    confine_command(o);
    exec_command(argv, file);
  }
  close(slave);
  close(CONTROL_FD);
  control_open = 0;
  /* The terminal's own signals (^C, ^\, ^Z, a resize) reach its foreground group, which we are in:
     they are the command's. So are the runtime's, which go to the whole group or cgroup. */
  static const int IGNORED[] = {SIGINT, SIGQUIT, SIGTSTP, SIGTTIN, SIGTTOU, SIGTERM, SIGHUP, SIGPIPE};
  for (size_t i = 0; i < sizeof IGNORED / sizeof IGNORED[0]; i++) signal(IGNORED[i], SIG_IGN);
  null_stdio(2);
  int status;
  if (!relay_terminal(master, -1, command, &status)) _exit(127);
  exit_like(status);
}

/* Runs as pid 1 of the new namespace: private /proc, the mounts asked for, the command, the reaper. */
static void run_init(char *const argv[], const char *file, const struct options *o, int status_fd, int tty_sock) __attribute__((noreturn));
static void run_init(char *const argv[], const char *file, const struct options *o, int status_fd, int tty_sock) {
  /* Our working directory was resolved before the mounts below: it is looked up again after
     them, or a relative path from it would bypass a read-only bind over part of it. */
  char cwd[4096];
  int have_cwd = getcwd(cwd, sizeof cwd) != NULL;
  /* Mounts made here must never propagate back to the host's namespace. */
  if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0) fail("mount", errno);
  if (mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) != 0) fail("mount", errno);
  setup_mounts(o);
  if (have_cwd && chdir(cwd) != 0) fail("mount", errno);
  /* --tty: allocated here, after the mounts (the namespace's devpts); the master goes to the leader. */
  int slave = -1;
  if (tty_sock >= 0) {
    int master;
    int err = open_terminal(o, &master, &slave);
    if (err == 0) err = send_fd(tty_sock, master);
    if (err != 0) fail("tty", err);
    close(master);
    close(tty_sock);
  }
  /* The init keeps every capability (it mounts nothing more, but a confined command must not be
     able to ptrace it): not dumpable, so its /proc files and ptrace need CAP_SYS_PTRACE. */
  prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
  sigset_t forwarded, none;
  forwarded_mask(&forwarded);
  sigemptyset(&none);
  /* Blocked until the command exists: a signal that lands first is forwarded once it can be. */
  sigprocmask(SIG_BLOCK, &forwarded, NULL);
  set_handlers(forward_to_namespace);

  pid_t command = fork();
  if (command < 0) fail("fork", errno);
  if (command == 0) {
    signal(SIGTERM, SIG_DFL);
    signal(SIGINT, SIG_DFL);
    signal(SIGHUP, SIG_DFL);
    signal(SIGQUIT, SIG_DFL);
    sigprocmask(SIG_SETMASK, &none, NULL);
    close(status_fd);
    setsid(); /* its own session and group inside the namespace (pgid 0 would confuse shells) */
    if (slave >= 0) {
      if (ioctl(slave, TIOCSCTTY, 0) != 0) fail("tty", errno);
      terminal_stdio(slave);
    }
    confine_command(o);
    exec_command(argv, file);
  }
  /* The init holds none of the command's pipes (output must reach EOF when the command's tree
     closes it), not its terminal, and not the control channel (EOF there means the command was exec'd). */
  if (slave >= 0) close(slave);
  close(CONTROL_FD);
  control_open = 0;
  null_stdio(0);
  sigprocmask(SIG_SETMASK, &none, NULL);

  for (;;) {
    int status;
    pid_t pid = waitpid(-1, &status, 0);
    if (pid < 0) {
      if (errno == EINTR) continue;
      break; /* ECHILD: the namespace is empty */
    }
    if (pid == command && status_fd >= 0) {
      ssize_t ignored = write(status_fd, &status, sizeof status);
      (void)ignored;
      close(status_fd);
      status_fd = -1;
    }
  }
  _exit(0);
}

static int wait_exit_code(pid_t child) {
  int status;
  while (waitpid(child, &status, 0) < 0)
    if (errno != EINTR) return errno;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 255;
}

static int probe_pidns(void) {
  pid_t child = fork();
  if (child < 0) return errno;
  if (child == 0) {
    if (unshare(CLONE_NEWPID | CLONE_NEWNS) != 0) _exit(errno & 0xff);
    pid_t init = fork();
    if (init < 0) _exit(errno & 0xff);
    if (init == 0) {
      if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0) _exit(errno & 0xff);
      if (mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) != 0) _exit(errno & 0xff);
      _exit(getpid() == 1 ? 0 : 255);
    }
    _exit(wait_exit_code(init));
  }
  return wait_exit_code(child);
}

/* Makes --confine's namespaces and mounts in a throw-away child; prints "confine ok" or the
   stage and errno that failed, as the control channel would have said them. */
static void probe_confine(void) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    printf("confine fork %d\n", errno);
    return;
  }
  fflush(stdout);
  pid_t child = fork();
  if (child < 0) {
    printf("confine fork %d\n", errno);
    return;
  }
  if (child == 0) {
    close(fds[0]);
    if (dup2(fds[1], CONTROL_FD) < 0) _exit(127);
    control_open = 1;
    if (unshare(CLONE_NEWPID | CLONE_NEWNS | CLONE_NEWCGROUP) != 0) fail("unshare", errno);
    pid_t init = fork();
    if (init < 0) fail("fork", errno);
    if (init == 0) {
      struct options none;
      memset(&none, 0, sizeof none);
      none.confine = 1;
      if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0) fail("mount", errno);
      if (mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) != 0) fail("mount", errno);
      setup_mounts(&none);
      _exit(0);
    }
    _exit(wait_exit_code(init));
  }
  close(fds[1]);
  char text[128];
  size_t got = 0;
  for (;;) {
    ssize_t n = read(fds[0], text + got, sizeof text - 1 - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += (size_t)n;
    if (got == sizeof text - 1) break;
  }
  close(fds[0]);
  text[got] = '\0';
  int code = wait_exit_code(child);
  char stage[32];
  int err;
  if (sscanf(text, "E %31s %d", stage, &err) == 2) printf("confine %s %d\n", stage, err);
  else if (code == 0) printf("confine ok\n");
  else printf("confine exit %d\n", code);
}

/* Whether --caps can confine the bounding set here ("caps ok"), has nothing to drop ("caps
   none": we hold no capability) or cannot ("caps <errno>"). */
static void probe_caps(void) {
  struct __user_cap_data_struct data[2];
  int err = cap_get(data);
  if (err != 0) {
    printf("caps %d\n", err);
    return;
  }
  if (data[0].permitted == 0 && data[1].permitted == 0) {
    printf("caps none\n");
    return;
  }
  fflush(stdout);
  pid_t child = fork();
  if (child < 0) {
    printf("caps %d\n", errno);
    return;
  }
  if (child == 0) {
    int dropped = drop_capabilities();
    if (dropped != 0) _exit(dropped & 0xff);
    _exit(bounding_confined() ? 0 : EPERM);
  }
  int code = wait_exit_code(child);
  if (code == 0) printf("caps ok\n");
  else printf("caps %d\n", code);
}

/* Whether --caps's seccomp filter can be installed here and refuses a user namespace ("seccomp
   ok"), or why not ("seccomp <errno>"). */
static void probe_seccomp(void) {
  fflush(stdout);
  pid_t child = fork();
  if (child < 0) {
    printf("seccomp %d\n", errno);
    return;
  }
  if (child == 0) {
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) _exit(errno & 0xff);
    int err = install_seccomp();
    if (err != 0) _exit(err & 0xff);
    _exit(unshare(CLONE_NEWUSER) != 0 && errno == EPERM ? 0 : EPROTO);
  }
  int code = wait_exit_code(child);
  if (code == 0) printf("seccomp ok\n");
  else printf("seccomp %d\n", code);
}

static int probe(const char *user_name) {
  int pidns = probe_pidns();
  if (pidns == 0) printf("pidns ok\n");
  else printf("pidns %d\n", pidns);
  if (pidns == 0) probe_confine();
  else printf("confine unshare %d\n", pidns);
  probe_caps();
  probe_seccomp();
  if (user_name != NULL) {
    struct passwd *pw = getpwnam(user_name);
    if (pw == NULL) {
      printf("user none\n");
    } else {
      gid_t groups[MAX_GROUPS];
      int n = MAX_GROUPS;
      if (getgrouplist(user_name, pw->pw_gid, groups, &n) < 0) n = 0;
      printf("user %u %u ", (unsigned)pw->pw_uid, (unsigned)pw->pw_gid);
      for (int i = 0; i < n; i++) printf(i == 0 ? "%u" : ",%u", (unsigned)groups[i]);
      printf("\n");
    }
  }
  return 0;
}

static int parse_id(const char *text, unsigned long *out) {
  char *end;
  errno = 0;
  unsigned long value = strtoul(text, &end, 10);
  if (errno != 0 || *text == '\0' || *end != '\0') return -1;
  *out = value;
  return 0;
}

int main(int argc, char *argv[]) {
  /* Nothing inherited beyond stdio and the control channel is ours to keep: the runtime's own
     inherited descriptors would otherwise live on in the namespace's init and reach the command. */
  if (syscall(SYS_close_range, CONTROL_FD + 1, ~0U, 0) != 0) {
    struct rlimit limit;
    int max = getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur < 65536 ? (int)limit.rlim_cur : 65536;
    for (int fd = CONTROL_FD + 1; fd < max; fd++) close(fd);
  }
  /* Started from a file descriptor (/proc/self/fd/N: spawn/helper.ts), the kernel names us "N". */
  prctl(PR_SET_NAME, "capsule-spawn", 0, 0, 0);
  control_open = fcntl(CONTROL_FD, F_GETFD) >= 0;
  if (control_open) {
    fcntl(CONTROL_FD, F_SETFD, FD_CLOEXEC);
  } else {
    /* Keep fd 3 taken (by /dev/null) so that closing "the control channel" never closes a pipe
       of ours that happened to get number 3. */
    int fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
    if (fd >= 0 && fd != CONTROL_FD) {
      dup2(fd, CONTROL_FD);
      fcntl(CONTROL_FD, F_SETFD, FD_CLOEXEC);
      close(fd);
    }
  }

  const char *probe_user = NULL;
  int want_probe = 0;
  static struct options o;
  memset(&o, 0, sizeof o);
  struct user_spec *user = &o.user;
  int have_uid = 0, have_gid = 0;
  int i = 1;
  for (; i < argc; i++) {
    const char *arg = argv[i];
    if (strcmp(arg, "--") == 0) {
      i++;
      break;
    }
    unsigned long value;
    if (strcmp(arg, "--cgroup") == 0 && i + 1 < argc) o.cgroup = argv[++i];
    else if (strcmp(arg, "--pidns") == 0) o.pidns = 1;
    else if (strcmp(arg, "--confine") == 0) o.confine = 1;
    else if (strcmp(arg, "--caps") == 0) o.caps = 1;
    else if (strcmp(arg, "--seccomp") == 0) o.seccomp = 1;
    else if (strcmp(arg, "--netns") == 0 && i + 1 < argc) o.netns = argv[++i];
    else if (strcmp(arg, "--netns-make") == 0 && i + 1 < argc) return netns_make(argv[++i]);
    else if (strcmp(arg, "--netns-drop") == 0 && i + 1 < argc) return netns_drop(argv[++i]);
    else if (strcmp(arg, "--rlimit") == 0 && i + 1 < argc && o.nrlimits < MAX_RLIMITS) {
      if (parse_rlimit(argv[++i], &o.rlimits[o.nrlimits]) != 0) fail("usage", EINVAL);
      o.nrlimits++;
    }
    else if ((strcmp(arg, "--ro") == 0 || strcmp(arg, "--rw") == 0) && i + 1 < argc && o.nbinds < MAX_BINDS) {
      o.binds[o.nbinds].writable = arg[3] == 'w';
      o.binds[o.nbinds++].path = argv[++i];
    }
    else if (strcmp(arg, "--hide") == 0 && i + 1 < argc && o.nhide < MAX_HIDE) o.hide[o.nhide++] = argv[++i];
    else if (strcmp(arg, "--tty") == 0 && i + 1 < argc) {
      unsigned cols = 0, rows = 0;
      char extra;
      if (sscanf(argv[++i], "%ux%u%c", &cols, &rows, &extra) != 2 || cols == 0 || rows == 0 || cols > 65535 || rows > 65535) fail("usage", EINVAL);
      o.tty = 1;
      o.tty_cols = (unsigned short)cols;
      o.tty_rows = (unsigned short)rows;
    }
    else if (strcmp(arg, "--probe") == 0) want_probe = 1;
    else if (strcmp(arg, "--user") == 0 && i + 1 < argc) probe_user = argv[++i];
    else if (strcmp(arg, "--uid") == 0 && i + 1 < argc && parse_id(argv[++i], &value) == 0) {
      user->uid = (uid_t)value;
      have_uid = 1;
    } else if (strcmp(arg, "--gid") == 0 && i + 1 < argc && parse_id(argv[++i], &value) == 0) {
      user->gid = (gid_t)value;
      have_gid = 1;
    } else if (strcmp(arg, "--groups") == 0 && i + 1 < argc) {
      char *list = argv[++i];
      for (char *item = strtok(list, ","); item != NULL && user->ngroups < MAX_GROUPS; item = strtok(NULL, ",")) {
        if (parse_id(item, &value) != 0) fail("usage", EINVAL);
        user->groups[user->ngroups++] = (gid_t)value;
      }
    } else fail("usage", EINVAL);
  }
  if (want_probe) return probe(probe_user);
  if (have_uid != have_gid) fail("usage", EINVAL);
  /* Mounts and a cgroup namespace exist only in a namespace of our own. */
  if (!o.pidns && (o.confine || o.nbinds > 0 || o.nhide > 0)) fail("usage", EINVAL);
  user->set = have_uid;
  if (user->set && user->ngroups == 0) user->groups[user->ngroups++] = user->gid;
  /* FILE, then the command's argv (argv[0] first). */
  if (argc - i < 2) fail("usage", EINVAL);
  const char *file = argv[i];
  char **command_argv = &argv[i + 1];

  if (o.netns != NULL) join_netns(o.netns);

  if (o.cgroup != NULL) {
    char path[4096];
    if (snprintf(path, sizeof path, "%s/cgroup.procs", o.cgroup) >= (int)sizeof path) fail("cgroup", ENAMETOOLONG);
    /* "0" is the writer itself; from here on every child we make is born inside the cgroup. */
    int err = write_file(path, "0");
    if (err != 0) fail("cgroup", err);
  }

  if (!o.pidns) {
    if (o.tty) run_with_terminal(command_argv, file, &o);
    confine_command(&o);
    exec_command(command_argv, file);
  }

  /* After joining the cgroup: a new cgroup namespace is rooted at the cgroup we are in. */
  if (unshare(CLONE_NEWPID | CLONE_NEWNS | (o.confine ? CLONE_NEWCGROUP : 0)) != 0) fail("unshare", errno);
  int status_pipe[2];
  if (pipe2(status_pipe, O_CLOEXEC) != 0) fail("fork", errno);
  int tty_sock[2] = {-1, -1};
  if (o.tty && socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, tty_sock) != 0) fail("tty", errno);
  sigset_t forwarded, none;
  forwarded_mask(&forwarded);
  sigemptyset(&none);
  sigprocmask(SIG_BLOCK, &forwarded, NULL);
  set_handlers(forward_to_init);
  pid_t init = fork();
  if (init < 0) fail("fork", errno);
  if (init == 0) {
    close(status_pipe[0]);
    if (tty_sock[0] >= 0) close(tty_sock[0]);
    /* The status pipe must survive into the init but not into the command (closed there). */
    run_init(command_argv, file, &o, status_pipe[1], tty_sock[1]);
  }
  close(status_pipe[1]);
  if (tty_sock[1] >= 0) close(tty_sock[1]);
  forward_target = init;
  char line[32];
  snprintf(line, sizeof line, "I %d\n", (int)init);
  control_write(line);
  close(CONTROL_FD);
  control_open = 0;
  int status;
  if (o.tty) {
    /* We relay the terminal the init made: our stdin and stdout stay the runtime's pipes. */
    null_stdio(2);
    signal(SIGPIPE, SIG_IGN);
    sigprocmask(SIG_SETMASK, &none, NULL);
    int master = recv_fd(tty_sock[0]);
    close(tty_sock[0]);
    if (master >= 0 && relay_terminal(master, status_pipe[0], -1, &status)) exit_like(status);
    /* No terminal came (the init's setup failed), or the init ended without the status: as below. */
    null_stdio(0);
  } else {
    null_stdio(0);
    sigprocmask(SIG_SETMASK, &none, NULL);
  }

  size_t got = 0;
  char *bytes = (char *)&status;
  while (got < sizeof status) {
    ssize_t n = read(status_pipe[0], bytes + got, sizeof status - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += (size_t)n;
  }
  if (got == sizeof status) exit_like(status);
  /* The init died before the command's status reached us (e.g. SIGKILL): end as it ended. */
  int init_status;
  while (waitpid(init, &init_status, 0) < 0) {
    if (errno != EINTR) _exit(127);
  }
  exit_like(init_status);
}
