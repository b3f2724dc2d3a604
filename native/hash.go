package native

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"strconv"

	"github.com/agents-fleet/fleet/protocol"
)

// hashFields returns the sha256 hex of fields, each prefixed with its
// length, so no two different lists hash alike.
func hashFields(fields ...string) string {
	h := sha256.New()
	var n [8]byte
	for _, f := range fields {
		binary.BigEndian.PutUint64(n[:], uint64(len(f)))
		h.Write(n[:])
		h.Write([]byte(f))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// Evidence is the hash an approve or deny pins (DESIGN §7): the task's
// command, its worktree's base commit and the policy version.
func Evidence(command, baseCommit, policyVersion string) string {
	return hashFields("evidence/v1", command, baseCommit, policyVersion)
}

// requestHash hashes a request's canonical fields (every body field, not the
// transport id): the same operationId must come with the same hash.
func requestHash(r *protocol.NativeRequest) string {
	rev := ""
	if r.ExpectedRevision != nil {
		rev = strconv.FormatInt(*r.ExpectedRevision, 10)
	}
	return hashFields("request/v1", r.Action, r.RootID, r.OperationID, rev,
		r.TaskID, r.HoldHash, r.Rationale, r.Supersedes, r.ProofID)
}

// holdHash identifies one version of a hold.
func holdHash(rootID, taskID, reason string, createdAt, version int64) string {
	return hashFields("hold/v1", rootID, taskID, reason,
		strconv.FormatInt(createdAt, 10), strconv.FormatInt(version, 10))
}

// newID returns prefix followed by 16 random hex digits.
func newID(prefix string) string {
	var b [8]byte
	rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}
