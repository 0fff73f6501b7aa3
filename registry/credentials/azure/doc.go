// Package azure is the credentials Source for Azure Container Registry: it
// trades the pod's AKS Workload Identity (a federated service-account
// token) for a Microsoft Entra ID access token, and that for a refresh
// token of the registry, for hosts of the form <name>.azurecr.io (.cn,
// .us).
//
// Both exchanges are a form POST and a small JSON answer, spoken here over
// net/http rather than through the Azure SDK (azidentity, with azcore and
// MSAL), which asks the authority's discovery documents before the token
// and would add about 60 packages for these two requests.
package azure
