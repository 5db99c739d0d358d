package main

// The launcher's private mount namespace (PROTOCOL.md section 7).
//
// Landlock governs writes to file contents and directory entries, not a
// file's mode, owner or times, and it cannot withhold a subtree of a
// directory it grants. Where the launcher runs in a mount namespace of its
// own (bashcall as root, or an unprivileged user namespace), it closes both
// gaps before it confines itself: every mount becomes read-only except the
// writable directories, each bound onto itself so that it cannot be renamed
// away, and the protected paths inside them (git's hooks and config,
// bashcall's control files) are bound read-only on top. A read-only mount
// refuses chmod, chown, utime and rename with EROFS, even to root.

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// confineMounts arranges the namespace: writable directories stay as they
// are, every other mount turns read-only, pinned directories (git dirs)
// become mount points, protected paths are read-only mounts of their own.
// It must run before the capabilities are dropped.
func confineMounts(writable, pins, protected []string) error {
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("making mounts private: %w", err)
	}
	var dirs []string
	for _, w := range writable {
		fd, err := openNoSymlinks(w)
		if errors.Is(err, unix.ENOENT) {
			continue
		}
		if err != nil {
			return err
		}
		dir, err := isDirFD(fd)
		if err == nil && dir {
			err = bindOnto(fd, w, false)
			dirs = append(dirs, w)
		}
		unix.Close(fd)
		if err != nil {
			return err
		}
	}
	if err := readOnlyOutside(dirs); err != nil {
		return err
	}
	if err := bindEach(pins, dirs, false); err != nil {
		return err
	}
	if err := bindEach(protected, dirs, true); err != nil {
		return err
	}
	// The working directory still names the mount it was entered on,
	// read-only now: enter it again by path, through the new mounts.
	wd, err := unix.Getwd()
	if err != nil {
		return fmt.Errorf("getcwd: %w", err)
	}
	if err := unix.Chdir(wd); err != nil {
		return fmt.Errorf("chdir %q: %w", wd, err)
	}
	return nil
}

// bindEach binds each path that lies in one of dirs onto itself; the
// others are on a read-only mount already.
func bindEach(paths, dirs []string, ro bool) error {
	for _, p := range paths {
		if !withinAny(p, dirs) {
			continue
		}
		fd, err := openNoSymlinks(p)
		if errors.Is(err, unix.ENOENT) {
			continue
		}
		if err != nil {
			return err
		}
		err = bindOnto(fd, p, ro)
		unix.Close(fd)
		if err != nil {
			return err
		}
	}
	return nil
}

// openNoSymlinks opens p as an O_PATH descriptor without following any
// symlink in it: bashcall hands the launcher canonical paths, so a symlink
// found now was swapped in since, and the launcher fails instead.
func openNoSymlinks(p string) (int, error) {
	fd, err := unix.Openat2(unix.AT_FDCWD, p, &unix.OpenHow{Flags: unix.O_PATH | unix.O_CLOEXEC | unix.O_NOFOLLOW, Resolve: unix.RESOLVE_NO_SYMLINKS})
	if err != nil {
		return -1, fmt.Errorf("opening %q: %w", p, err)
	}
	return fd, nil
}

// isDirFD reports whether fd is a directory.
func isDirFD(fd int) (bool, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return false, err
	}
	return st.Mode&unix.S_IFMT == unix.S_IFDIR, nil
}

// bindOnto binds the tree at fd onto itself, read-only (recursively) when
// ro. The new mount makes the path a mount point, which rename and rmdir
// refuse. A writable directory's bind keeps the flags its mounts had: one
// the administrator made read-only stays so.
func bindOnto(fd int, p string, ro bool) error {
	tree, err := unix.OpenTree(fd, "", unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_RECURSIVE|unix.AT_EMPTY_PATH)
	if err != nil {
		return fmt.Errorf("open_tree %q: %w", p, err)
	}
	defer unix.Close(tree)
	if ro {
		attr := unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY}
		if err := unix.MountSetattr(tree, "", unix.AT_EMPTY_PATH|unix.AT_RECURSIVE, &attr); err != nil {
			return fmt.Errorf("mount_setattr %q: %w", p, err)
		}
	}
	if err := unix.MoveMount(tree, "", fd, "", unix.MOVE_MOUNT_F_EMPTY_PATH|unix.MOVE_MOUNT_T_EMPTY_PATH); err != nil {
		return fmt.Errorf("move_mount %q: %w", p, err)
	}
	return nil
}

// readOnlyOutside makes every mount that does not lie within one of dirs
// read-only. The binds of dirs are mounts of their own, so a read-only
// parent mount does not reach them.
func readOnlyOutside(dirs []string) error {
	points, err := mountPoints()
	if err != nil {
		return err
	}
	attr := unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY}
	for _, mp := range points {
		if withinAny(mp, dirs) {
			continue
		}
		err := unix.MountSetattr(unix.AT_FDCWD, mp, unix.AT_SYMLINK_NOFOLLOW|unix.AT_NO_AUTOMOUNT, &attr)
		// A mount point that is gone or hidden under another mount is
		// out of reach anyway.
		if err != nil && !errors.Is(err, unix.ENOENT) && !errors.Is(err, unix.ENOTDIR) {
			return fmt.Errorf("making %q read-only: %w", mp, err)
		}
	}
	return nil
}

// mountPoints lists this namespace's mount points from /proc/self/mountinfo.
func mountPoints() ([]string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("listing mounts: %w", err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			return nil, errors.New("listing mounts: malformed /proc/self/mountinfo")
		}
		out = append(out, unescapeMountinfo(fields[4]))
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("listing mounts: %w", err)
	}
	return out, nil
}

// unescapeMountinfo undoes the kernel's octal escapes (\040 for a space,
// \011, \012, \134) in a mountinfo path.
func unescapeMountinfo(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// withinAny reports whether p is one of dirs or lies beneath one.
func withinAny(p string, dirs []string) bool {
	for _, d := range dirs {
		if within(p, d) {
			return true
		}
	}
	return false
}
