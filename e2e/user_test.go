package e2e

import (
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
)

func setCred(cmd *exec.Cmd, c *userCred) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Credential = &syscall.Credential{Uid: c.uid, Gid: c.gid, Groups: []uint32{c.dockerGid}}
}

func chownTree(t testing.TB, root string, c *userCred) {
	t.Helper()
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, int(c.uid), int(c.gid))
	})
	if err != nil {
		t.Fatal(err)
	}
}
