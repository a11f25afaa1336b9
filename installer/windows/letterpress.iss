; Inno Setup 6 script for the one-folder Letterpress bundle (dist\letterpress from packaging\build.py).
;
; NOT BUILT OR TESTED in this project's CI (Linux only). Build on Windows, from the repository root:
;     python packaging\build.py                       (runs iscc for you when it is on PATH), or
;     iscc /DAppVersion=0.1.0 installer\windows\letterpress.iss
; Output: dist\Letterpress-<version>-setup.exe
;
; Installs per user by default (no administrator prompt; the dialog offers "all users"), adds a Start menu
; entry, an optional desktop icon, an optional "Open with Letterpress" for .md/.txt, and an uninstaller.
; After installing, setup runs `letterpress-cli.exe --self-test` when the user ticks the check box.

#ifndef AppVersion
  #define AppVersion "0.1.0"
#endif
#define AppName "Letterpress"
#define AppExe "letterpress.exe"
#define AppCli "letterpress-cli.exe"
#define BundleDir "..\..\dist\letterpress"

[Setup]
; A fixed AppId keeps upgrades and the uninstaller tied to one product; never change it.
AppId={{6E3C2B7A-4F1D-4C8E-9A55-1E2D7C4B9F30}
AppName={#AppName}
AppVersion={#AppVersion}
AppVerName={#AppName} {#AppVersion}
AppPublisher=Letterpress
AppComments=A private, offline writing assistant
DefaultDirName={autopf}\{#AppName}
DefaultGroupName={#AppName}
DisableProgramGroupPage=yes
PrivilegesRequired=lowest
PrivilegesRequiredOverridesAllowed=dialog
ArchitecturesAllowed=x64compatible
ArchitecturesInstallIn64BitMode=x64compatible
OutputDir=..\..\dist
OutputBaseFilename={#AppName}-{#AppVersion}-setup
SetupIconFile=..\..\resources\icons\letterpress.ico
UninstallDisplayIcon={app}\{#AppExe}
UninstallDisplayName={#AppName} {#AppVersion}
Compression=lzma2/max
SolidCompression=yes
LZMAUseSeparateProcess=yes
; A CUDA build (torch + CUDA libraries) can exceed the 2 GB a single setup.exe may hold: spill into .bin parts.
DiskSpanning=yes
DiskSliceSize=max
WizardStyle=modern
ChangesAssociations=yes
CloseApplications=yes
MinVersion=10.0

[Languages]
Name: "english"; MessagesFile: "compiler:Default.isl"

[Tasks]
Name: "desktopicon"; Description: "{cm:CreateDesktopIcon}"; GroupDescription: "{cm:AdditionalIcons}"; Flags: unchecked
Name: "assocmd"; Description: "Add ""Open with Letterpress"" for Markdown files (.md)"; GroupDescription: "File types:"; Flags: unchecked
Name: "assoctxt"; Description: "Add ""Open with Letterpress"" for text files (.txt)"; GroupDescription: "File types:"; Flags: unchecked

[Files]
Source: "{#BundleDir}\*"; DestDir: "{app}"; Flags: ignoreversion recursesubdirs createallsubdirs

[Icons]
Name: "{group}\{#AppName}"; Filename: "{app}\{#AppExe}"; WorkingDir: "{userdocs}"
Name: "{group}\Check the {#AppName} installation"; Filename: "{cmd}"; Parameters: "/k ""{app}\{#AppCli}"" --self-test"; WorkingDir: "{app}"
Name: "{group}\{cm:UninstallProgram,{#AppName}}"; Filename: "{uninstallexe}"
Name: "{autodesktop}\{#AppName}"; Filename: "{app}\{#AppExe}"; WorkingDir: "{userdocs}"; Tasks: desktopicon

[Registry]
; ProgID with the open command; the extensions only list it under "Open with" (they do not steal the default).
Root: HKA; Subkey: "Software\Classes\Letterpress.Document"; ValueType: string; ValueName: ""; ValueData: "Letterpress document"; Flags: uninsdeletekey; Tasks: assocmd assoctxt
Root: HKA; Subkey: "Software\Classes\Letterpress.Document\DefaultIcon"; ValueType: string; ValueName: ""; ValueData: "{app}\{#AppExe},0"; Tasks: assocmd assoctxt
Root: HKA; Subkey: "Software\Classes\Letterpress.Document\shell\open\command"; ValueType: string; ValueName: ""; ValueData: """{app}\{#AppExe}"" ""%1"""; Tasks: assocmd assoctxt
Root: HKA; Subkey: "Software\Classes\.md\OpenWithProgids"; ValueType: none; ValueName: "Letterpress.Document"; Flags: uninsdeletevalue; Tasks: assocmd
Root: HKA; Subkey: "Software\Classes\.txt\OpenWithProgids"; ValueType: none; ValueName: "Letterpress.Document"; Flags: uninsdeletevalue; Tasks: assoctxt
Root: HKA; Subkey: "Software\Classes\Applications\{#AppExe}\SupportedTypes"; ValueType: string; ValueName: ".md"; ValueData: ""; Flags: uninsdeletekey
Root: HKA; Subkey: "Software\Classes\Applications\{#AppExe}\SupportedTypes"; ValueType: string; ValueName: ".txt"; ValueData: ""

[Run]
Filename: "{app}\{#AppExe}"; Description: "{cm:LaunchProgram,{#AppName}}"; Flags: nowait postinstall skipifsilent
Filename: "{cmd}"; Parameters: "/k ""{app}\{#AppCli}"" --self-test"; Description: "Check the installation (runs the self-test, about a minute)"; Flags: postinstall skipifsilent unchecked

[UninstallDelete]
; Only what the app itself writes inside its folder; the writer's documents and settings are never removed.
Type: filesandordirs; Name: "{app}\_internal\__pycache__"
