package e2e

import "testing"

// TestKubernetes runs the tests on the test cluster, one after another.
// It is a parallel test so that it runs after the suite's sequential
// tests, by when the cluster's binaries, built cold in the background from
// the start of the run (startClusterBuild), are there: a cold build costs
// the run the idle time of the Docker tests instead of time of its own.
// One at a time: each test's Pods ask for much of the node.
func TestKubernetes(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		run  func(*testing.T)
	}{
		{"ClusterRunsAPod", testKubernetesClusterRunsAPod},
		{"ClusterProvisionsClaims", testKubernetesClusterProvisionsClaims},
		{"ClusterRuntimeClass", testKubernetesClusterRuntimeClass},
		{"EngineLifecycle", testKubernetesEngineLifecycle},
		{"EngineOperations", testKubernetesEngineOperations},
		{"EngineConformance", testKubernetesEngineConformance},
		{"AttachAndFollowLogs", testKubernetesAttachAndFollowLogs},
		{"PodDeletedKeepsTheSnapshots", testKubernetesPodDeletedKeepsTheSnapshots},
		{"NestedRepository", testKubernetesNestedRepository},
		{"Allowlist", testKubernetesAllowlist},
		{"RuntimeRestart", testKubernetesRuntimeRestart},
		{"NetworkPolicy", testKubernetesNetworkPolicy},
		{"FleetOverTwoEngines", testKubernetesFleetOverTwoEngines},
		{"AttackAgent", testAttackKubernetesAgent},
		{"AttackRepositoryImage", testAttackKubernetesRepositoryImage},
		{"AttackProxyImage", testAttackKubernetesProxyImage},
		{"WarmPool", testKubernetesWarmPool},
		{"ImagePush", testKubernetesImagePush},
	} {
		t.Run(c.name, c.run)
	}
}
