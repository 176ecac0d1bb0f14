package server

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/eas-server/eas-server/internal/service"
	"github.com/eas-server/eas-server/servicejson"
)

// ControlPlane is what /api/v2/services drives. serve drives its
// in-process service.Manager; eas-server controller drives Kubernetes
// objects (internal/kube). The two share the API, its wire types, its
// authentication and its error mapping (controlErr): errors wrap
// service.ErrNotFound, ErrExists, ErrBusy, ErrInvalid or ErrShuttingDown
// to get their status codes.
type ControlPlane interface {
	Create(ctx context.Context, spec *servicejson.Service) (service.Info, error)
	Update(ctx context.Context, name string, spec *servicejson.Service) (service.Info, error)
	Describe(ctx context.Context, name string) (service.Info, error)
	List(ctx context.Context) ([]service.Info, error)
	Start(ctx context.Context, name string) (service.Info, error)
	Stop(ctx context.Context, name string) (service.Info, error)
	Delete(ctx context.Context, name string) error
	SwitchVersion(ctx context.Context, name string, version int) (service.Info, error)
	Events(ctx context.Context, name string) ([]EventObject, error)
	Instances(ctx context.Context, name string) ([]InstanceObject, error)
	Versions(ctx context.Context, name string) (VersionList, error)
}

// managerControl is the ControlPlane of one process: a service.Manager.
type managerControl struct{ m *service.Manager }

func (mc managerControl) Create(ctx context.Context, spec *servicejson.Service) (service.Info, error) {
	return mc.m.Create(ctx, spec)
}

func (mc managerControl) Update(ctx context.Context, name string, spec *servicejson.Service) (service.Info, error) {
	return mc.m.Update(ctx, name, spec)
}

func (mc managerControl) Describe(ctx context.Context, name string) (service.Info, error) {
	return mc.m.Describe(ctx, name)
}

func (mc managerControl) List(ctx context.Context) ([]service.Info, error) {
	var out []service.Info
	for _, svc := range mc.m.List() {
		out = append(out, svc.Info(ctx))
	}
	return out, nil
}

func (mc managerControl) Start(ctx context.Context, name string) (service.Info, error) {
	return mc.m.Start(ctx, name)
}

func (mc managerControl) Stop(ctx context.Context, name string) (service.Info, error) {
	return mc.m.Stop(ctx, name)
}

func (mc managerControl) Delete(ctx context.Context, name string) error {
	return mc.m.Delete(ctx, name)
}

func (mc managerControl) SwitchVersion(ctx context.Context, name string, v int) (service.Info, error) {
	return mc.m.SwitchVersion(ctx, name, v)
}

func (mc managerControl) get(name string) (*service.Service, error) {
	svc, ok := mc.m.Get(name)
	if !ok {
		return nil, fmt.Errorf("service %q: %w", name, service.ErrNotFound)
	}
	return svc, nil
}

func (mc managerControl) Events(_ context.Context, name string) ([]EventObject, error) {
	svc, err := mc.get(name)
	if err != nil {
		return nil, err
	}
	out := []EventObject{}
	for _, e := range svc.Events() {
		out = append(out, EventObject(e))
	}
	return out, nil
}

func (mc managerControl) Instances(_ context.Context, name string) ([]InstanceObject, error) {
	svc, err := mc.get(name)
	if err != nil {
		return nil, err
	}
	out := []InstanceObject{}
	if live, ok := svc.Acquire(); ok {
		depth := live.Scheduler.QueueDepth()
		for i := range live.Instances() {
			out = append(out, InstanceObject{
				InstanceName: fmt.Sprintf("%s-v%d-%d", svc.Name, live.Version, i),
				Status:       "Running",
				Version:      live.Version,
				StartTime:    live.Started,
				QueueDepth:   depth,
			})
		}
		live.Release()
	}
	return out, nil
}

func (mc managerControl) Versions(ctx context.Context, name string) (VersionList, error) {
	svc, err := mc.get(name)
	if err != nil {
		return VersionList{}, err
	}
	info := svc.Info(ctx)
	out := VersionList{ServiceName: svc.Name, CurrentVersion: info.CurrentVersion, LatestVersion: info.LatestVersion, Versions: []VersionObject{}}
	for _, v := range svc.Versions() {
		out.Versions = append(out.Versions, NewVersionObject(v))
	}
	return out, nil
}

// NewVersionObject renders one stored version, naming its processor.
func NewVersionObject(v service.VersionInfo) VersionObject {
	vo := VersionObject{Version: v.Version, CreateTime: v.CreateTime, Current: v.Current, ServiceConfig: string(v.Config)}
	var head struct {
		Processor     string `json:"processor"`
		ProcessorType string `json:"processor_type"`
	}
	if json.Unmarshal(v.Config, &head) == nil {
		vo.Processor = head.Processor
		if vo.Processor == "" && head.ProcessorType != "" {
			vo.Processor = "custom " + head.ProcessorType
		}
	}
	return vo
}
