/*
 * capsule-spawn: the runtime's spawn helper (src/process/spawn/helper.ts drives it).
 *
 * It exists because a process must be inside its cgroup before it runs one instruction of the
 * command: moving it there after spawn() leaves a window in which a fork escapes. Node cannot do
 * that itself (libuv forks and execs in one call), so Node execs this helper, which joins the
 * cgroup, optionally isolates itself, and then execs the command in place.
 *
 *   capsule-spawn [--cgroup DIR] [--pidns] [--ro PATH]... [--rw PATH]... [--uid N --gid N [--groups G,G…]]
 *                 -- FILE ARGV0 [ARG…]
 *   capsule-spawn --probe [--user NAME]
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
 * --ro PATH      (with --pidns) bind PATH read-only in the step's mount namespace.
 * --rw PATH      (with --pidns) a writable exception beneath a --ro path: PATH is bound onto itself
 *                again after every --ro bind and made writable (a bind mount copies its source
 *                mount's read-only flag, so it is remounted without it). A delegated child capsule
 *                gets the parent's records read-only and its own children/<dlg_id>/ writable.
 * --uid/--gid/--groups  drop to this uid/gid/supplementary groups (and set no_new_privs) just
 *                before exec.
 *
 * Control channel: fd 3, when open, is a pipe to the runtime (close-on-exec here). We write
 *   "I <pid>\n"          the host pid of the namespace init (with --pidns);
 *   "E <stage> <errno>\n" setup or exec failed (stage: cgroup|unshare|fork|mount|user|exec|usage),
 *                        then exit 127.
 * End of file on fd 3 without an E line means the command was exec'd.
 *
 * --probe prints "pidns ok" or "pidns <errno>" (can a PID + mount namespace with a private /proc
 * be made here?) and, with --user NAME, "user <uid> <gid> <g,g,…>" or "user none".
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
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#define CONTROL_FD 3
#define MAX_RO 16
#define MAX_RW 16
#define MAX_GROUPS 256

static const int FORWARDED[] = {SIGTERM, SIGINT, SIGHUP, SIGQUIT};
#define N_FORWARDED (sizeof FORWARDED / sizeof FORWARDED[0])

static int control_open = 0;
static volatile pid_t forward_target = 0;

static void control_write(const char *text) {
  if (!control_open) return;
  size_t len = strlen(text);
  while (len > 0) {
    ssize_t n = write(CONTROL_FD, text, len);
    if (n < 0) {
      if (errno == EINTR) continue;
      return;
    }
    text += n;
    len -= (size_t)n;
  }
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

static void null_stdio(void) {
  int fd = open("/dev/null", O_RDWR | O_CLOEXEC);
  if (fd < 0) return;
  dup2(fd, 0);
  dup2(fd, 1);
  dup2(fd, 2);
  if (fd > 2) close(fd);
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

static void drop_privileges(const struct user_spec *user) {
  if (!user->set) return;
  if (setgroups((size_t)user->ngroups, user->groups) != 0) fail("user", errno);
  if (setgid(user->gid) != 0) fail("user", errno);
  if (setuid(user->uid) != 0) fail("user", errno);
  /* A setuid binary must not take the step back to root. */
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) fail("user", errno);
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

/* Runs as pid 1 of the new namespace: private /proc, read-only binds, the command, the reaper. */
static void run_init(char *const argv[], const char *file, char *ro[], int nro, char *rw[], int nrw,
                     const struct user_spec *user, int status_fd) __attribute__((noreturn));
static void run_init(char *const argv[], const char *file, char *ro[], int nro, char *rw[], int nrw,
                     const struct user_spec *user, int status_fd) {
  /* Mounts made here must never propagate back to the host's namespace. */
  if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0) fail("mount", errno);
  if (mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) != 0) fail("mount", errno);
  for (int i = 0; i < nro; i++) {
    if (mount(ro[i], ro[i], NULL, MS_BIND | MS_REC, NULL) != 0) fail("mount", errno);
    if (mount(NULL, ro[i], NULL, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV, NULL) != 0) fail("mount", errno);
  }
  /* After the read-only binds, so that an exception beneath one is mounted on top of it. */
  for (int i = 0; i < nrw; i++) {
    if (mount(rw[i], rw[i], NULL, MS_BIND | MS_REC, NULL) != 0) fail("mount", errno);
    if (mount(NULL, rw[i], NULL, MS_BIND | MS_REMOUNT | MS_NOSUID | MS_NODEV, NULL) != 0) fail("mount", errno);
  }
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
    drop_privileges(user);
    exec_command(argv, file);
  }
  /* The init holds none of the command's pipes (output must reach EOF when the command's tree
     closes it) and not the control channel (EOF there means the command was exec'd). */
  close(CONTROL_FD);
  control_open = 0;
  null_stdio();
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
    int status;
    if (waitpid(init, &status, 0) < 0) _exit(errno & 0xff);
    _exit(WIFEXITED(status) ? WEXITSTATUS(status) : 255);
  }
  int status;
  if (waitpid(child, &status, 0) < 0) return errno;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 255;
}

static int probe(const char *user_name) {
  int pidns = probe_pidns();
  if (pidns == 0) printf("pidns ok\n");
  else printf("pidns %d\n", pidns);
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

  const char *cgroup = NULL;
  const char *probe_user = NULL;
  int pidns = 0, want_probe = 0, nro = 0, nrw = 0;
  char *ro[MAX_RO];
  char *rw[MAX_RW];
  struct user_spec user;
  memset(&user, 0, sizeof user);
  int have_uid = 0, have_gid = 0;
  int i = 1;
  for (; i < argc; i++) {
    const char *arg = argv[i];
    if (strcmp(arg, "--") == 0) {
      i++;
      break;
    }
    unsigned long value;
    if (strcmp(arg, "--cgroup") == 0 && i + 1 < argc) cgroup = argv[++i];
    else if (strcmp(arg, "--pidns") == 0) pidns = 1;
    else if (strcmp(arg, "--ro") == 0 && i + 1 < argc && nro < MAX_RO) ro[nro++] = argv[++i];
    else if (strcmp(arg, "--rw") == 0 && i + 1 < argc && nrw < MAX_RW) rw[nrw++] = argv[++i];
    else if (strcmp(arg, "--probe") == 0) want_probe = 1;
    else if (strcmp(arg, "--user") == 0 && i + 1 < argc) probe_user = argv[++i];
    else if (strcmp(arg, "--uid") == 0 && i + 1 < argc && parse_id(argv[++i], &value) == 0) {
      user.uid = (uid_t)value;
      have_uid = 1;
    } else if (strcmp(arg, "--gid") == 0 && i + 1 < argc && parse_id(argv[++i], &value) == 0) {
      user.gid = (gid_t)value;
      have_gid = 1;
    } else if (strcmp(arg, "--groups") == 0 && i + 1 < argc) {
      char *list = argv[++i];
      for (char *item = strtok(list, ","); item != NULL && user.ngroups < MAX_GROUPS; item = strtok(NULL, ",")) {
        if (parse_id(item, &value) != 0) fail("usage", EINVAL);
        user.groups[user.ngroups++] = (gid_t)value;
      }
    } else fail("usage", EINVAL);
  }
  if (want_probe) return probe(probe_user);
  if (have_uid != have_gid) fail("usage", EINVAL);
  user.set = have_uid;
  if (user.set && user.ngroups == 0) user.groups[user.ngroups++] = user.gid;
  /* FILE, then the command's argv (argv[0] first). */
  if (argc - i < 2) fail("usage", EINVAL);
  const char *file = argv[i];
  char **command_argv = &argv[i + 1];

  if (cgroup != NULL) {
    char path[4096];
    if (snprintf(path, sizeof path, "%s/cgroup.procs", cgroup) >= (int)sizeof path) fail("cgroup", ENAMETOOLONG);
    /* "0" is the writer itself; from here on every child we make is born inside the cgroup. */
    int err = write_file(path, "0");
    if (err != 0) fail("cgroup", err);
  }

  if (!pidns) {
    drop_privileges(&user);
    exec_command(command_argv, file);
  }

  if (unshare(CLONE_NEWPID | CLONE_NEWNS) != 0) fail("unshare", errno);
  int status_pipe[2];
  if (pipe2(status_pipe, O_CLOEXEC) != 0) fail("fork", errno);
  sigset_t forwarded, none;
  forwarded_mask(&forwarded);
  sigemptyset(&none);
  sigprocmask(SIG_BLOCK, &forwarded, NULL);
  set_handlers(forward_to_init);
  pid_t init = fork();
  if (init < 0) fail("fork", errno);
  if (init == 0) {
    close(status_pipe[0]);
    /* The status pipe must survive into the init but not into the command (closed there). */
    run_init(command_argv, file, ro, nro, rw, nrw, &user, status_pipe[1]);
  }
  close(status_pipe[1]);
  forward_target = init;
  char line[32];
  snprintf(line, sizeof line, "I %d\n", (int)init);
  control_write(line);
  close(CONTROL_FD);
  control_open = 0;
  null_stdio();
  sigprocmask(SIG_SETMASK, &none, NULL);

  int status;
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
