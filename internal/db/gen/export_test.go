package gen

// The fast claim decode, for the external tests that compare it with
// rows.Scan on a real server (claim_decode_test.go).
var (
	ClaimRowsDecodable = claimRowsDecodable
	DecodeClaimRow     = func(v [][]byte, r *JobRunsClaimRow) bool { return decodeClaimRow(v, r, &claimCache{}) }
)

// JobRunsClaimSQL is the claim statement itself.
const JobRunsClaimSQL = jobRunsClaim
