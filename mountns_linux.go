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
// refuses chmod, chown, utime and rename with EROFS, even to root. But for
// /dev, every mount also refuses to open a device file (nodev): the
// devices read through another name (a bind of /dev elsewhere, a second
// devtmpfs, a node made on a disk) are not filtered as /dev's are
// (readrules.go).

import (
	"errors"
	"fmt"
	"slices"

	"golang.org/x/sys/unix"
)

// confineMounts arranges the namespace: the writable directories are
// cloned as they are, every mount turns read-only, the clones are attached
// back onto their paths, pinned directories (git dirs) become mount points
// and protected paths read-only mounts of their own. Every mount turns
// read-only at once, as one tree: no mount point is looked up by its
// path, so none stays writable because it lies behind a directory this
// user cannot search (another user's FUSE mount, a container's overlay)
// or because mountinfo writes its name ambiguously. It must run before
// the capabilities are dropped.
func confineMounts(writable, pins, protected []string) error {
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("making mounts private: %w", err)
	}
	var clones []clone
	defer func() {
		for _, c := range clones {
			unix.Close(c.tree)
		}
	}()
	// /dev's own tree of mounts, cloned read-only with the flags each
	// had, is put back over it once every mount is nodev: clearing nodev
	// on it instead would fail in a user namespace on the mounts below
	// /dev that came nodev (/dev/shm), whose flag is locked there. Where
	// /dev is a directory of the root mount (some containers), its clone
	// is a bind of that directory, with the root mount's flags.
	dev, devTree, err := cloneDev()
	if err != nil {
		return err
	}
	if devTree >= 0 {
		defer unix.Close(dev)
		defer unix.Close(devTree)
	}
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
			var tree int
			if tree, err = cloneTree(fd, w, writableAttrs(w)); err == nil {
				clones = append(clones, clone{w, tree})
			}
		}
		unix.Close(fd)
		if err != nil {
			return err
		}
	}
	attr := unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY | unix.MOUNT_ATTR_NODEV}
	if err = unix.MountSetattr(unix.AT_FDCWD, "/", unix.AT_RECURSIVE, &attr); err != nil {
		return fmt.Errorf("making every mount read-only: %w", err)
	}
	if devTree >= 0 {
		if err := attach(devTree, dev, "/dev"); err != nil {
			return err
		}
		for _, d := range devWhole {
			if err := bindNodev(d); err != nil {
				return err
			}
		}
	}
	// Shorter paths first, so that a directory's clone goes on before the
	// clones of the directories inside it, which it would hide; each is
	// opened again, through the clones attached before it.
	slices.SortStableFunc(clones, func(a, b clone) int { return len(a.path) - len(b.path) })
	var dirs []string
	for _, c := range clones {
		fd, err := openNoSymlinks(c.path)
		if err != nil {
			return err
		}
		err = attach(c.tree, fd, c.path)
		unix.Close(fd)
		if err != nil {
			return err
		}
		dirs = append(dirs, c.path)
	}
	if err := bindEach(pins, dirs, 0); err != nil {
		return err
	}
	if err := bindEach(protected, dirs, unix.MOUNT_ATTR_RDONLY); err != nil {
		return err
	}
	// The working directory still names the mount it was entered on,
	// read-only now: enter it again by path, through the new mounts.
	wd, err := unix.Getwd()
	if err != nil {
		return fmt.Errorf("getcwd: %w", err)
	}
	if err := unix.Chdir(wd); err != nil { // the workdir's, not the sandbox's, fault
		return &startFailure{fmt.Errorf("chdir %q: %w", wd, err)}
	}
	return nil
}

// cloneDev returns /dev (the descriptor) and its clone, to put back over
// it, where /dev is a directory opened without a symlink; else -1s, and no
// device opens anywhere (no confined call starts then anyway: bashcall
// opens /dev/null, and the rules' paths in /dev without symlinks).
func cloneDev() (dev, tree int, err error) {
	dev, err = openNoSymlinks("/dev")
	if err != nil {
		return -1, -1, nil
	}
	if dir, _ := isDirFD(dev); !dir {
		unix.Close(dev)
		return -1, -1, nil
	}
	if tree, err = cloneTree(dev, "/dev", unix.MOUNT_ATTR_RDONLY); err != nil {
		unix.Close(dev)
		return -1, -1, err
	}
	return dev, tree, nil
}

// devWhole are the directories of /dev that hold no device a program
// needs, kept nodev (the read grant gives /dev/shm whole and withholds
// /dev/mqueue): a device there (a chroot built in /dev/shm, with /dev
// bound into it) is not filtered as /dev's are.
var devWhole = []string{"/dev/shm", "/dev/mqueue"}

// writableAttrs is what a writable directory's clone gets: nodev, but
// where /dev's filter is the user's grant of that directory.
func writableAttrs(w string) uint64 {
	if within(w, "/dev") && !withinAny(w, devWhole) {
		return 0
	}
	return unix.MOUNT_ATTR_NODEV
}

// bindNodev binds the tree at p onto itself read-only and nodev, where p
// is a directory (not a symlink: /dev/shm to /run/shm is on a nodev mount).
func bindNodev(p string) error {
	fd, err := openNoSymlinks(p)
	if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ELOOP) {
		return nil
	}
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	if dir, err := isDirFD(fd); err != nil || !dir {
		return err
	}
	return bindOnto(fd, p, unix.MOUNT_ATTR_RDONLY|unix.MOUNT_ATTR_NODEV)
}

// clone is a writable directory's tree of mounts, cloned before every
// mount turned read-only.
type clone struct {
	path string
	tree int
}

// bindEach binds each path that lies in one of dirs onto itself; the
// others are on a read-only mount already.
func bindEach(paths, dirs []string, attrs uint64) error {
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
		err = bindOnto(fd, p, attrs)
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

// bindOnto binds the tree at fd onto itself, with the mount attributes
// attrs set on each of its mounts (read-only for protected paths). The new
// mount makes the path a mount point, which rename and rmdir refuse. A
// writable directory's bind keeps the flags its mounts had: one the
// administrator made read-only stays so.
func bindOnto(fd int, p string, attrs uint64) error {
	tree, err := cloneTree(fd, p, attrs)
	if err != nil {
		return err
	}
	defer unix.Close(tree)
	return attach(tree, fd, p)
}

// cloneTree clones the tree of mounts at fd, with the mount attributes
// attrs set on each, and returns the detached clone.
func cloneTree(fd int, p string, attrs uint64) (int, error) {
	tree, err := unix.OpenTree(fd, "", unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_RECURSIVE|unix.AT_EMPTY_PATH)
	if err != nil {
		return -1, fmt.Errorf("open_tree %q: %w", p, err)
	}
	if attrs != 0 {
		attr := unix.MountAttr{Attr_set: attrs}
		if err := unix.MountSetattr(tree, "", unix.AT_EMPTY_PATH|unix.AT_RECURSIVE, &attr); err != nil {
			unix.Close(tree)
			return -1, fmt.Errorf("mount_setattr %q: %w", p, err)
		}
	}
	return tree, nil
}

// attach mounts the detached tree on fd.
func attach(tree, fd int, p string) error {
	if err := unix.MoveMount(tree, "", fd, "", unix.MOVE_MOUNT_F_EMPTY_PATH|unix.MOVE_MOUNT_T_EMPTY_PATH); err != nil {
		return fmt.Errorf("move_mount %q: %w", p, err)
	}
	return nil
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
